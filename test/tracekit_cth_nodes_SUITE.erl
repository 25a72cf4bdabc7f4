%% tracekit_cth with `nodes': a sample suite (run by Common Test in a peer
%% of its own) whose failing cases span three nodes, and one that starts a
%% node itself; the trace the hook writes holds every node's events, each
%% line with its node, and the seq_trace diagram the flow across them.
-module(tracekit_cth_nodes_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, suite/0, init_per_suite/1, end_per_suite/1]).
-export([failing_case_spans_nodes/1, node_started_by_the_case/1, bad_nodes_option/1,
         killed_recording_restores_the_nodes/1, killed_agent_restores_its_node/1]).

suite() ->
    [{timetrap, {minutes, 3}}].

all() ->
    [failing_case_spans_nodes, node_started_by_the_case, bad_nodes_option,
     killed_recording_restores_the_nodes, killed_agent_restores_its_node].

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

%%% The hook's processes killed ------------------------------------------------

%% The hook records a case with seq_trace on this node and a peer (their
%% system seq tracers set); its recording process is killed: within a
%% second each node has its seq tracer back, no tracekit session and no
%% more rings than before.
killed_recording_restores_the_nodes(Config) ->
    killed_restores(Config, fun(Trace, _Peer) -> exit(Trace, kill) end, both).

%% The agent of the peer is killed: the peer is restored at once, and this
%% node when the case ends.
killed_agent_restores_its_node(Config) ->
    killed_restores(Config,
                    fun(_Trace, Peer) ->
                            [erpc:call(Peer, erlang, exit, [A, kill]) || A <- agents(Peer)]
                    end, peer).

killed_restores(Config, Kill, Which) ->
    Stop = start_dist(),
    Ebin = filename:dirname(code:which(tracekit)),
    {ok, P, Peer} = peer:start_link(#{name => peer:random_name(?MODULE),
                                      args => ["-pa", Ebin,
                                               "-pa", filename:dirname(code:which(?MODULE))]}),
    %% A seq tracer of someone else's on each node, to be found again.
    Holder = fun() -> spawn(fun() -> receive stop -> ok end end) end,
    Mine = Holder(),
    Theirs = erpc:call(Peer, erlang, apply, [Holder, []]),
    false = seq_trace:set_system_tracer(Mine),
    _ = erpc:call(Peer, seq_trace, set_system_tracer, [Theirs]),
    Rings0 = #{N => erpc:call(N, tracekit_ring, alive, []) || N <- [node(), Peer]},
    Restored = fun(N, Tracer) ->
                       fun() ->
                               _ = erpc:call(N, erlang, garbage_collect, []),
                               erpc:call(N, seq_trace, get_system_tracer, []) =:= Tracer
                                   andalso tracekit_sessions(N) =:= []
                                   andalso erpc:call(N, tracekit_ring, alive, [])
                                               =:= maps:get(N, Rings0)
                       end
               end,
    try
        {ok, St0} = tracekit_cth:init(tracekit_cth, #{seq_trace => true, nodes => [Peer]}),
        Log = filename:join(?config(priv_dir, Config), "killed.html"),
        {ok, St1} = tracekit_cth:post_init_per_testcase(?MODULE, killed, [{tc_logfile, Log}],
                                                        ok, St0),
        [Trace] = [T || T <- processes(),
                        erlang:process_info(T, {dictionary, '$tracekit'})
                            =:= {{dictionary, '$tracekit'}, self()}],
        ?assertNotEqual(Mine, seq_trace:get_system_tracer()),
        ?assertNotEqual(Theirs, erpc:call(Peer, seq_trace, get_system_tracer, [])),
        Kill(Trace, Peer),
        wait_until(Restored(Peer, Theirs), 1000),
        case Which of
            both ->
                wait_until(Restored(node(), Mine), 1000);
            peer ->
                ?assertNotEqual(Mine, seq_trace:get_system_tracer()),
                {[], St2} = tracekit_cth:pre_end_per_testcase(?MODULE, killed, [], St1),
                _ = tracekit_cth:post_end_per_testcase(?MODULE, killed, [], ok, St2),
                wait_until(Restored(node(), Mine), 1000)
        end
    after
        seq_trace:set_token([]),
        _ = seq_trace:set_system_tracer(false),
        exit(Mine, kill),
        peer:stop(P),
        _ = [net_kernel:stop() || Stop]
    end.

agents(Node) ->
    [A || A <- erpc:call(Node, erlang, processes, []),
          {current_function, {tracekit_agent, F, _}}
              <- [erpc:call(Node, erlang, process_info, [A, current_function])],
          F =:= loop orelse F =:= closed].

tracekit_sessions(Node) ->
    [S || {tracekit, _} = S <- erpc:call(Node, trace, session_info, [all])].

start_dist() ->
    case node() of
        nonode@nohost ->
            _ = os:cmd(epmd() ++ " -daemon"),
            timer:sleep(200),
            {ok, _} = net_kernel:start(tracekit_cth_nodes_ct, #{name_domain => shortnames}),
            true;
        _ ->
            false
    end.

epmd() ->
    case os:find_executable("epmd") of
        false -> filename:join([code:root_dir(), "erts-" ++ erlang:system_info(version),
                                "bin", "epmd"]);
        Path -> Path
    end.

wait_until(Pred, Ms) ->
    Until = erlang:monotonic_time(millisecond) + Ms,
    wait_until_(Pred, Until).

wait_until_(Pred, Until) ->
    case Pred() of
        true -> ok;
        false ->
            case erlang:monotonic_time(millisecond) > Until of
                true -> ?assert(Pred());
                false -> timer:sleep(20), wait_until_(Pred, Until)
            end
    end.
