%% tracekit_cth with `nodes': a sample suite (run by Common Test in a peer
%% of its own) whose failing cases span three nodes, and one that starts a
%% node itself; the trace the hook writes holds every node's events, each
%% line with its node, and the seq_trace diagram the flow across them.
-module(tracekit_cth_nodes_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, suite/0, init_per_suite/1, end_per_suite/1]).
-export([failing_case_spans_nodes/1, node_started_by_the_case/1, bad_nodes_option/1]).

suite() ->
    [{timetrap, {minutes, 3}}].

all() ->
    [failing_case_spans_nodes, node_started_by_the_case, bad_nodes_option].

init_per_suite(Config) ->
    Priv = ?config(priv_dir, Config),
    Sample = filename:join([Priv, "sample", "tracekit_cth_nodes_sample_SUITE"]),
    ok = filelib:ensure_dir(Sample),
    {ok, _} = file:copy(filename:join(?config(data_dir, Config),
                                      "tracekit_cth_nodes_sample_SUITE.erl.src"),
                        Sample ++ ".erl"),
    LogDir = filename:join(Priv, "cth_nodes_sample_logs"), % priv_dir is the run's
    ok = filelib:ensure_path(LogDir),
    Ebin = filename:dirname(code:which(tracekit)),
    {ok, Peer, _} = peer:start_link(#{connection => standard_io, args => ["-pa", Ebin]}),
    Result = try peer:call(Peer, ct, run_test,
                           [[{suite, Sample}, {logdir, LogDir}, {auto_compile, true}]],
                           150000)
             after peer:stop(Peer)
             end,
    ct:log("sample run: ~p", [Result]),
    [RunDir] = filelib:wildcard(filename:join(LogDir, "ct_run.*/*.logs/run.*")),
    [{result, Result}, {run_dir, RunDir} | Config].

end_per_suite(_Config) ->
    ok.

read(Config, TC, Ext) ->
    File = filename:join(?config(run_dir, Config),
                         "tracekit_cth_nodes_sample_suite." ++ atom_to_list(TC)
                         ++ ".tracekit" ++ Ext),
    {ok, Bin} = file:read_file(File),
    unicode:characters_to_list(Bin).

lines(Text) -> [L || L <- string:split(Text, "\n", all), L =/= ""].

%% Lines of the trace by their node (the first word).
by_node(Lines) ->
    maps:groups_from_list(fun(L) -> hd(string:split(L, " ")) end, Lines).

failing_case_spans_nodes(Config) ->
    ?assertEqual({0, 2, {0, 0}}, ?config(result, Config)),
    Text = read(Config, across_two_nodes, ".txt"),
    ct:log("~ts", [Text]),
    [_Header, Recorded | Events] = lines(Text),
    {match, [Nodes]} = re:run(Recorded, "^recorded on (.*)$", [{capture, all_but_first, list}]),
    ?assertEqual(3, length(string:split(Nodes, ", ", all))),
    ByNode = by_node(Events),
    ?assertEqual(3, map_size(ByNode)),
    [Origin] = [N || N <- maps:keys(ByNode), lists:prefix("tk_sample_origin@", N)],
    %% Here: the case's call of handle/1 and its seq_trace send; on A the
    %% relay's receive and send; on B the answerer's receive, its call of
    %% handle/1 and its send of the answer.
    OnB = [N || N <- maps:keys(ByNode), N =/= Origin,
                lists:any(fun(L) -> string:find(L, "handle(4)") =/= nomatch end,
                          maps:get(N, ByNode))],
    ?assertMatch([_], OnB),
    ?assert(lists:any(fun(L) -> string:find(L, "handle(4)") =/= nomatch end,
                      maps:get(Origin, ByNode))),
    [A] = maps:keys(ByNode) -- [Origin | OnB],
    ?assert(length(maps:get(A, ByNode)) >= 2),
    %% The seq_trace diagram: the request from the case to the relay, on
    %% to the answerer, and the answer back.
    Seq = read(Config, across_two_nodes, ".seq.mmd"),
    ct:log("~ts", [Seq]),
    %% (The token may also ride on a message of Common Test's own, such
    %% as a reply of ct_util_server: only the flow's messages are counted.)
    Arrows = [L || L <- lines(Seq), string:find(L, "->>") =/= nomatch,
                   re:run(L, ": \\{(req|answer),") =/= nomatch],
    ?assertEqual(3, length(Arrows)).

node_started_by_the_case(Config) ->
    Text = read(Config, node_started_in_case, ".txt"),
    ct:log("~ts", [Text]),
    [_Header, _Recorded | Events] = lines(Text),
    %% handle(7) was called on the node the case started.
    [Line] = [L || L <- Events, string:find(L, "handle(7)") =/= nomatch],
    [Node | _] = string:split(Line, " "),
    ?assertMatch("tk_sample" ++ _, Node),
    ?assertNot(lists:prefix("tk_sample_origin@", Node)).

bad_nodes_option(_Config) ->
    [?assertMatch({error, "nodes must be all or a list of node names"},
                  tracekit_cth:check_options(#{nodes => Bad}))
     || Bad <- [none, "a@b", [1], [a | b]]],
    ?assertMatch({ok, #{nodes := all}}, tracekit_cth:check_options(#{nodes => all})).
