%% tracekit-cat (priv/bin/tracekit-cat), the C reader of trace files,
%% against the Erlang reader: for every workload of tracekit_ring_SUITE
%% written to a trace file, `--format text' prints exactly what
%% tracekit_file:format/2 prints, `--format dbg' read back by
%% dbg:trace_client/3 gives the events tracekit_file:read/1 gives (which
%% tracekit_ring_SUITE checks against OTP's process tracer), `--format
%% jsonl | chrome | folded' write the bytes tracekit_export writes from the
%% same file (EXPORTS.md), and `--format html' the page
%% tracekit_report:html/2 makes of it. Also random terms, filters, files
%% of several nodes, errors and exit statuses, and thousands of damaged
%% files through the AddressSanitizer build.
-module(tracekit_cat_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, groups/0, init_per_suite/1, end_per_suite/1,
         init_per_group/2, end_per_group/2]).
-export([workloads/1, random_terms/1, filters/1, nodes/1, errors/1,
         damaged_files/1, wrap_set/1]).
-export([peer_workload/2]).

-define(VARIANTS, [plain, timestamp, monotonic_timestamp,
                   strict_monotonic_timestamp, cpu_timestamp, scheduler_id]).
-define(WORKLOADS, [messages, calls, procs, running, ports, gc, seq_trace]).
-define(EXPORTS, [jsonl, chrome, folded, html]).

all() ->
    [{group, variants}, random_terms, filters, wrap_set, nodes, errors, damaged_files].

groups() ->
    [{variants, [], [{group, V} || V <- ?VARIANTS]}
     | [{V, [], [workloads]} || V <- ?VARIANTS]].

init_per_suite(Config) ->
    Cat = filename:join(code:priv_dir(tracekit), "bin/tracekit-cat"),
    case filelib:is_regular(Cat) of
        true -> [{cat, Cat} | Config];
        false -> {skip, "priv/bin/tracekit-cat is not built (make cat)"}
    end.

end_per_suite(_) ->
    ok.

init_per_group(variants, Config) ->
    Config;
init_per_group(plain, Config) ->
    [{flags, []} | Config];
init_per_group(cpu_timestamp, Config) ->
    _ = erlang:trace(all, true, [cpu_timestamp]),
    [{flags, [timestamp]} | Config];
init_per_group(Flag, Config) ->
    [{flags, [Flag]} | Config].

end_per_group(cpu_timestamp, _) ->
    _ = erlang:trace(all, false, [cpu_timestamp]),
    ok;
end_per_group(_, _) ->
    ok.

%%% Running tracekit-cat ---------------------------------------------------

%% {ExitStatus, Stdout, Stderr}
run(Config, Args) ->
    run(?config(cat, Config), Config, Args).

run(Cat, Config, Args) ->
    Dir = ?config(priv_dir, Config),
    N = integer_to_list(erlang:unique_integer([positive])),
    Out = filename:join(Dir, "out." ++ N),
    Err = filename:join(Dir, "err." ++ N),
    Cmd = lists:join(" ", [quote(A) || A <- [Cat | Args]])
        ++ " >" ++ quote(Out) ++ " 2>" ++ quote(Err) ++ "; echo $?",
    Status = list_to_integer(string:trim(os:cmd(lists:flatten(Cmd)))),
    {ok, O} = file:read_file(Out),
    {ok, E} = file:read_file(Err),
    ok = file:delete(Out),
    ok = file:delete(Err),
    {Status, O, E}.

quote(S) ->
    "'" ++ lists:flatten(string:replace(S, "'", "'\\''", all)) ++ "'".

%% What tracekit_file:format/2 prints, and its result.
erl_text(Config, Source) ->
    erl_text(Config, Source, #{}).

erl_text(Config, Source, Opts) ->
    Path = filename:join(?config(priv_dir, Config),
                         "fmt." ++ integer_to_list(erlang:unique_integer([positive]))),
    {ok, Io} = file:open(Path, [write, {encoding, utf8}]),
    R = tracekit_file:format(Source, Opts#{io => Io}),
    ok = file:close(Io),
    {ok, Text} = file:read_file(Path),
    ok = file:delete(Path),
    {R, Text}.

%% Both readers give the same text, line for line.
same_text(Config, Source) ->
    {R, Expected} = erl_text(Config, Source),
    Files = case Source of [C | _] when is_integer(C) -> [Source]; _ -> Source end,
    {Status, Got, _} = run(Config, Files),
    same_lines(Expected, Got),
    {R, Status, Got}.

same_lines(Expected, Got) ->
    E = binary:split(Expected, <<"\n">>, [global]),
    G = binary:split(Got, <<"\n">>, [global]),
    [?assertEqual({N, LE}, {N, LG})
     || {N, LE, LG} <- lists:zip3(lists:seq(1, min(length(E), length(G))),
                                  lists:sublist(E, length(G)), lists:sublist(G, length(E))),
        LE =/= LG],
    ?assertEqual(length(E), length(G)).

%% The events dbg:trace_client/3 reads back from a dbg format file.
dbg_events(Config, Sources) ->
    Dbg = filename:join(?config(priv_dir, Config),
                        "dbg." ++ integer_to_list(erlang:unique_integer([positive]))),
    {0, <<>>, <<>>} = run(Config, ["--format", "dbg", "-o", Dbg | Sources]),
    Self = self(),
    Ref = make_ref(),
    Handler = fun(end_of_trace, Acc) -> Self ! {Ref, lists:reverse(Acc)}, Acc;
                 (E, Acc) -> [E | Acc]
              end,
    Pid = dbg:trace_client(file, Dbg, {Handler, []}),
    true = is_pid(Pid),
    receive {Ref, Events} -> ok = file:delete(Dbg), Events
    after 60000 -> error(dbg_trace_client_timeout)
    end.

trace_files(Dir) ->
    lists:sort(filelib:wildcard(filename:join(Dir, "trace.*"))).

%% `tracekit-cat --format F' and tracekit_export:F/2 give the same bytes,
%% for each export: Source for tracekit_export (files, or the events a
%% filter keeps), Args and Files for tracekit-cat. Returns
%% tracekit_export's results.
same_exports(Config, Files) ->
    same_exports(Config, Files, Files, []).

same_exports(Config, Source, Files, Args) ->
    same_exports(Config, Source, Files, Args, fun(Text) -> Text end).

%% Norm: what both pages go through before they are compared (the
%% report's table and names print pids as the shell does, with node
%% numbers each reader chooses).
same_exports(Config, Source, Files, Args, Norm) ->
    [same_export(Config, F, Source, Files, Args, Norm) || F <- ?EXPORTS].

same_export(Config, Format, Source, Files, Args, Norm) ->
    {R, Expected} = erl_export(Config, Format, Source),
    {Status, Got, Err} = run(Config, ["--format", atom_to_list(Format) | Args ++ Files]),
    case Format of
        html -> same_bytes(Format, Norm(Expected), Norm(Got));
        _ -> same_bytes(Format, Expected, Got)
    end,
    case R of
        {ok, _} -> ?assertEqual({Format, 0, <<>>}, {Format, Status, Err});
        {error, Why} -> ?assertEqual({Format, status(Why)}, {Format, Status})
    end,
    well_formed(Format, Got),
    R.

%% tracekit-cat's exit status for a read error of tracekit_export.
status({corrupt, _, _}) -> 1;
status({file, _, not_a_trace}) -> 4;
status(_) -> 3.

%% What tracekit_export:Format/2 writes, and its result; for html, the
%% page of tracekit_report:html/2 with its default options, and the
%% result of reading the source (the page itself says when reading
%% stopped early).
erl_export(_Config, html, Source) ->
    {ok, Html, _Info} = tracekit_report:html(Source, #{}),
    R = case Source of
            [E | _] when is_tuple(E) -> {ok, length(Source)};
            [] -> {ok, 0};
            _ ->
                case tracekit_file:fold(fun(_, N) -> N + 1 end, 0, Source) of
                    {ok, N} -> {ok, N};
                    {error, Why, _} -> {error, Why}
                end
        end,
    {R, Html};
erl_export(Config, Format, Source) ->
    Path = filename:join(?config(priv_dir, Config),
                         "exp." ++ integer_to_list(erlang:unique_integer([positive]))),
    R = tracekit_export:Format(Source, Path),
    {ok, Bytes} = file:read_file(Path),
    ok = file:delete(Path),
    {R, Bytes}.

%% Equal bytes; else the first line that differs, and (for JSON lines)
%% the members that differ, as OTP's json module reads them.
same_bytes(_Format, Same, Same) ->
    ok;
same_bytes(Format, Expected, Got) ->
    {N, LE, LG} = first_diff(binary:split(Expected, <<"\n">>, [global]),
                             binary:split(Got, <<"\n">>, [global]), 1),
    ct:fail({Format, {line, N}, {tracekit_export, LE}, {tracekit_cat, LG},
             {differing_members, json_diff(LE, LG)}}).

first_diff([X | E], [X | G], N) -> first_diff(E, G, N + 1);
first_diff([X | _], [Y | _], N) -> {N, X, Y};
first_diff([], [Y | _], N) -> {N, missing, Y};
first_diff([X | _], [], N) -> {N, X, missing}.

json_diff(A, B) when is_binary(A), is_binary(B) ->
    try {json:decode(no_comma(A)), json:decode(no_comma(B))} of
        {#{} = JA, #{} = JB} ->
            [{K, maps:get(K, JA, absent), maps:get(K, JB, absent)}
             || K <- lists:usort(maps:keys(JA) ++ maps:keys(JB)),
                maps:get(K, JA, absent) =/= maps:get(K, JB, absent)];
        _ -> not_objects
    catch _:_ -> not_json
    end;
json_diff(_, _) ->
    not_json.

%% A Chrome event's line ends with the comma before the next.
no_comma(Line) ->
    case binary:last(Line) of
        $, -> binary:part(Line, 0, byte_size(Line) - 1);
        _ -> Line
    end.

%% Chrome: one JSON document; jsonl: a JSON object per line.
well_formed(chrome, Got) ->
    ?assertMatch(#{<<"traceEvents">> := L} when is_list(L), json:decode(Got));
well_formed(jsonl, Got) ->
    [?assertMatch(#{<<"i">> := _}, json:decode(L))
     || L <- binary:split(Got, <<"\n">>, [global, trim])],
    ok;
well_formed(folded, _Got) ->
    ok;
well_formed(html, Got) ->
    ?assertMatch(<<"<!DOCTYPE html>\n", _/binary>>, Got),
    ?assertEqual(<<"</html>\n">>, binary:part(Got, byte_size(Got) - 8, 8)).

%%% Cases ----------------------------------------------------------------------

%% Every workload of tracekit_ring_SUITE, traced into trace files as its
%% file group does (one file per tracer run), each file read both ways.
workloads(Config) ->
    Flags = ?config(flags, Config),
    Root = ?config(priv_dir, Config),
    Counts = [begin
                  Dir = filename:join(Root, atom_to_list(W)),
                  ok = filelib:ensure_path(Dir),
                  put(tk_sink, {file, Dir}),
                  _ = tracekit_ring_SUITE:W([{flags, Flags}, {sink, file}, {priv_dir, Dir}]),
                  seq_trace:reset_trace(),
                  _ = seq_trace:set_system_tracer(false),
                  [check_file(Config, F) || F <- trace_files(Dir)]
              end || W <- ?WORKLOADS],
    ct:log("events per file: ~p", [Counts]),
    ?assert(lists:sum(lists:append(Counts)) > 100).

check_file(Config, F) ->
    {{ok, N}, 0, _} = same_text(Config, F),
    {ok, Events} = tracekit_file:read(F),
    ?assertEqual(Events, dbg_events(Config, [F])),
    [{ok, N} = R || R <- same_exports(Config, [F])],
    N.

%% Random terms of every kind through the file tracer's own callbacks
%% (as any process may call them): the text format to the character,
%% with its depth and length limits.
random_terms(Config) ->
    Dir = ?config(priv_dir, Config),
    [begin
         Path = filename:join(Dir, "random." ++ integer_to_list(Seed)),
         rand:seed(exsss, {Seed, 2, 3}),
         write_random(Path, 2000),
         {{ok, 2000}, 0, _} = same_text(Config, Path),
         {ok, Events} = tracekit_file:read(Path),
         ?assertEqual(Events, dbg_events(Config, [Path])),
         [{ok, 2000} = R || R <- same_exports(Config, [Path])]
     end || Seed <- lists:seq(1, 6)],
    ok.

write_random(Path, N) ->
    %% A ring big enough for every event however slowly the file is
    %% written (a loaded machine): none dropped.
    {ok, F} = tracekit_file:new(#{path => Path, buffer => 64 * 1024 * 1024}),
    Self = self(),
    [begin
         Tag = lists:nth(rand:uniform(9), [send, 'receive', call, return_from, exit,
                                           register, spawn, link, in]),
         Term = case Tag of
                    call -> {lists:nth(rand:uniform(3), [lists, 'Mod', m]), f,
                             case rand:uniform(4) of 1 -> '...'; 2 -> 3; _ -> rand_list(3) end};
                    return_from -> {m, f, rand:uniform(3)};
                    register -> lists:nth(rand:uniform(3), [foo, 'Bar', undefined]);
                    spawn -> self();
                    link -> rand_term(1);
                    in -> {m, f, 2};
                    _ -> rand_term(4)
                end,
         Opts0 = case Tag of
                     send -> #{extra => lists:nth(rand:uniform(3), [Self, make_ref(), foo])};
                     return_from -> #{extra => rand_term(3)};
                     spawn -> #{extra => {m, f, rand_list(2)}};
                     _ -> #{}
                 end,
         Opts1 = case rand:uniform(4) of
                     1 -> Opts0#{match_spec_result => rand_term(2)};
                     2 -> Opts0#{scheduler_id => rand:uniform(4)};
                     _ -> Opts0
                 end,
         Opts = case rand:uniform(4) of
                    1 -> Opts1#{timestamp => erlang:timestamp()};
                    2 -> Opts1#{timestamp => erlang:monotonic_time()};
                    3 -> Opts1#{timestamp => {erlang:monotonic_time(), rand:uniform(100)}};
                    4 -> Opts1
                end,
         tracekit_file:trace(Tag, F, Self, Term, Opts)
     end || _ <- lists:seq(1, N)],
    ok = tracekit_file:close(F).

rand_list(D) -> [rand_term(D) || _ <- lists:seq(1, rand:uniform(4) - 1)].

rand_term(0) -> rand:uniform(100);
rand_term(D) ->
    case rand:uniform(24) of
        1 -> rand:uniform(1 bsl 70) - (1 bsl 69);
        2 -> case rand:uniform(3) of
                 1 -> rand:uniform() * math:pow(10, rand:uniform(40) - 20);
                 2 -> float(rand:uniform(1 bsl 62)) * (rand:uniform(2) * 2 - 3);
                 3 -> float(rand:uniform(1 bsl rand:uniform(60)))
             end;
        3 -> lists:nth(rand:uniform(9), [a, 'B', 'hello world', 'é', '', 'after', '\n',
                                         'ok', '\x{1F600}x']);
        4 -> list_to_binary([rand:uniform(256) - 1 || _ <- lists:seq(1, rand:uniform(20))]);
        5 -> <<"hello">>;
        6 -> unicode:characters_to_binary("héllo wörld \x{1F600}");
        7 -> lists:seq($a, $a + rand:uniform(40));
        8 -> [rand:uniform(300) || _ <- lists:seq(1, rand:uniform(5))];
        9 -> list_to_tuple(rand_list(D - 1));
        10 -> rand_list(D - 1);
        11 -> maps:from_list([{rand_term(D - 1), rand_term(D - 1)}
                              || _ <- lists:seq(1, rand:uniform(4))]);
        12 -> self();
        13 -> make_ref();
        14 -> [rand_term(D - 1) | rand_term(D - 1)];
        15 -> lists:duplicate(rand:uniform(300), $x);
        16 -> <<(rand:uniform(255)):7>>;
        17 -> fun() -> ok end;
        18 -> fun lists:map/2;
        19 -> "line\r\nnext\ttab\e";
        20 -> list_to_binary(lists:duplicate(rand:uniform(300), $y));
        21 -> hd(erlang:ports());
        22 -> lists:seq(1, rand:uniform(60));
        23 -> [rand_term(D - 1) || _ <- lists:seq(1, rand:uniform(40))];
        24 -> maps:from_list([{K, rand_term(D - 1)} || K <- lists:seq(1, 40)])
    end.

%% --tag, --pid, --since, --until: the lines of the unfiltered text whose
%% events pass.
filters(Config) ->
    Dir = ?config(priv_dir, Config),
    Path = filename:join(Dir, "filters"),
    {ok, F} = tracekit_file:new(#{path => Path}),
    S = trace:session_create(cat_filters, {tracekit_file, F}, []),
    Self = self(),
    Worker = fun() -> receive go -> ok end,
                      [Self ! {n, I} || I <- lists:seq(1, 20)],
                      register(cat_filter_w, self()),
                      [Self ! {m, I} || I <- lists:seq(1, 20)],
                      unregister(cat_filter_w)
             end,
    A = spawn(Worker),
    B = spawn(Worker),
    [1 = trace:process(S, P, true, [send, procs, timestamp]) || P <- [A, B]],
    A ! go,
    timer:sleep(200),
    Mid = os:system_time(nanosecond),
    timer:sleep(200),
    B ! go,
    timer:sleep(200),
    trace:session_destroy(S),
    ok = tracekit_file:close(F),
    {ok, Events} = tracekit_file:read(Path),
    {0, All, _} = run(Config, [Path]),
    Lines = lists:droplast(binary:split(All, <<"\n">>, [global])),
    ?assertEqual(length(Events), length(Lines)),
    Pairs = lists:zip(Events, Lines),
    Expect = fun(Pred) -> iolist_to_binary([[L, $\n] || {E, L} <- Pairs, Pred(E)]) end,
    {0, Sends, _} = run(Config, ["--tag", "send", Path]),
    ?assertEqual(Expect(fun(E) -> element(3, E) =:= send end), Sends),
    {0, Regs, _} = run(Config, ["--tag=register,unregister", Path]),
    ?assertEqual(Expect(fun(E) -> lists:member(element(3, E), [register, unregister]) end), Regs),
    ?assertNotEqual(<<>>, Regs),
    {0, OfA, _} = run(Config, ["--pid", pid_to_list(A), Path]),
    ?assertEqual(Expect(fun(E) -> element(2, E) =:= A end), OfA),
    {0, Both, _} = run(Config, ["--pid", pid_to_list(A), "--pid", pid_to_list(B),
                                "--tag", "send", Path]),
    ?assertEqual(Expect(fun(E) -> element(3, E) =:= send end), Both),
    %% A registered name: the events of the process since it registered.
    {0, Named, _} = run(Config, ["--pid", "cat_filter_w", Path]),
    ?assertNotEqual(<<>>, Named),
    MidArg = integer_to_list(Mid div 1000000000) ++ "."
        ++ string:pad(integer_to_list(Mid rem 1000000000), 9, leading, $0),
    {0, Late, _} = run(Config, ["--since", MidArg, Path]),
    ?assertEqual(Expect(fun(E) -> element(2, E) =:= B end), Late),
    {0, Early, _} = run(Config, ["--until", MidArg, Path]),
    ?assertEqual(Expect(fun(E) -> element(2, E) =:= A end), Early),
    {0, <<>>, _} = run(Config, ["--until", "1970-01-01T00:00:01Z", Path]),
    {0, All, _} = run(Config, ["--since", "2000-01-01T00:00:00+01:00", Path]),
    {0, <<>>, _} = run(Config, ["--node", "nobody@nowhere", Path]),
    {0, All, _} = run(Config, ["--node", atom_to_list(node()), Path]),
    %% The exports of what the filters keep: tracekit_export's of those
    %% events.
    OfName = named_since(cat_filter_w, Events),
    Cases = [{["--tag", "send"], fun(E) -> element(3, E) =:= send end},
             {["--tag=register,unregister"],
              fun(E) -> lists:member(element(3, E), [register, unregister]) end},
             {["--pid", pid_to_list(A)], fun(E) -> element(2, E) =:= A end},
             {["--pid", "cat_filter_w"], fun(E) -> lists:member(E, OfName) end},
             {["--pid", pid_to_list(B), "--tag", "send", "--since", MidArg],
              fun(E) -> element(2, E) =:= B andalso element(3, E) =:= send end},
             {["--since", MidArg], fun(E) -> element(2, E) =:= B end},
             {["--until", MidArg], fun(E) -> element(2, E) =:= A end},
             {["--until", "1970-01-01T00:00:01Z"], fun(_) -> false end},
             {["--node", "nobody@nowhere"], fun(_) -> false end},
             {["--node", atom_to_list(node())], fun(_) -> true end}],
    ?assertNotEqual([], OfName),
    [[{ok, _} = R || R <- same_exports(Config, [E || E <- Events, Keep(E)], [Path], Args)]
     || {Args, Keep} <- Cases],
    ok.

%% The events of the processes that registered Name, from their register
%% event on (what `--pid Name' keeps).
named_since(Name, Events) ->
    {Kept, _} = lists:foldl(
                  fun(E, {Acc, Named}) ->
                          Named1 = case E of
                                       {trace_ts, P, register, Name, _} -> Named#{P => true};
                                       _ -> Named
                                   end,
                          case maps:is_key(element(2, E), Named1) of
                              true -> {[E | Acc], Named1};
                              false -> {Acc, Named1}
                          end
                  end, {[], #{}}, Events),
    lists:reverse(Kept).

%% A wrap set read by its base name, merged by time across its files.
wrap_set(Config) ->
    Base = filename:join(?config(priv_dir, Config), "wrap"),
    {ok, F} = tracekit_file:new(#{path => Base, wrap => {16384, 4}}),
    S = trace:session_create(cat_wrap, {tracekit_file, F}, []),
    Self = self(),
    P = spawn(fun() -> receive go -> ok end,
                       [self() ! {n, I, <<I:32>>} || I <- lists:seq(1, 3000)],
                       Self ! {done, self()} end),
    1 = trace:process(S, P, true, [send, 'receive']),
    P ! go,
    receive {done, P} -> ok end,
    trace:session_destroy(S),
    ok = tracekit_file:close(F),
    #{files := Files} = tracekit_file:stats(F),
    ?assert(Files > 4),
    {{ok, N}, 0, _} = same_text(Config, Base),
    ?assert(N > 100),
    {ok, Events} = tracekit_file:read(Base),
    ?assertEqual(Events, dbg_events(Config, [Base])),
    [{ok, N} = R || R <- same_exports(Config, [Base])].

%% Files written on two peer nodes, read together here: merged by time as
%% tracekit_file:format/2 merges them. Pids of other nodes print with a
%% node number each reader chooses: compared by order of appearance.
nodes(Config) ->
    Dir = ?config(priv_dir, Config),
    Pa = [filename:dirname(code:which(M)) || M <- [tracekit, ?MODULE]],
    %% Named nodes (distributed on their own: this node need not be), driven
    %% through their standard input.
    Peers = [begin
                 Name = peer:random_name(cat),
                 {ok, Peer, _} = peer:start_link(#{connection => standard_io,
                                                   args => ["-sname", Name
                                                            | lists:append([["-pa", D] || D <- Pa])]}),
                 {Peer, peer:call(Peer, erlang, node, [])}
             end || _ <- [1, 2]],
    Files = [filename:join(Dir, "node" ++ integer_to_list(I))
             || I <- lists:seq(1, length(Peers))],
    [ok = peer:call(Peer, ?MODULE, peer_workload, [File, 200], 60000)
     || {{Peer, _}, File} <- lists:zip(Peers, Files)],
    [peer:stop(Peer) || {Peer, _} <- Peers],
    {R, Expected} = erl_text(Config, Files),
    {ok, Total} = R,
    ?assert(Total > 400),
    {0, Got, _} = run(Config, Files),
    same_lines(renumber(Expected), renumber(Got)),
    {ok, Events} = tracekit_file:read(Files),
    ?assertEqual(Events, dbg_events(Config, Files)),
    [{_, Node1} | _] = Peers,
    {0, One, _} = run(Config, ["--node", atom_to_list(Node1) | Files]),
    {ok, OfNode1} = tracekit_file:read(hd(Files)),
    ?assertEqual(length(OfNode1), length(binary:matches(One, <<"\n">>))),
    %% The exports name other nodes' pids by their node: no numbering
    %% apart, the same bytes. The report prints them as the text does.
    [{ok, Total} = X || X <- same_exports(Config, Files, Files, [], fun other_nodes_html/1)],
    [{ok, _} = X || X <- same_exports(Config, hd(Files), Files, ["--node", atom_to_list(Node1)],
                                      fun other_nodes_html/1)].

peer_workload(File, N) ->
    {ok, F} = tracekit_file:new(#{path => File}),
    S = trace:session_create(cat_peer, {tracekit_file, F}, []),
    Self = self(),
    P = spawn(fun() -> receive go -> ok end,
                       register(cat_peer_worker, self()),
                       [begin self() ! {n, I, node()}, erlang:yield() end
                        || I <- lists:seq(1, N)],
                       Self ! {done, self()} end),
    1 = trace:process(S, P, true, [send, procs, timestamp]),
    P ! go,
    receive {done, P} -> ok end,
    trace:session_destroy(S),
    ok = tracekit_file:close(F).

%% The first number of every pid, port and reference replaced by its
%% order of first appearance.
renumber(Text) ->
    Parts = re:split(Text, "(<|#Port<|#Ref<)([0-9]+)\\.", [{return, binary}]),
    renumber(Parts, #{}, []).

%% The same in a page, where < is written &lt;; and the participants'
%% and processes' labels that the report shortens to a number of
%% characters (the node numbers' widths move the cut) left out: their
%% whole text is in the diagram's titles and the summary.
other_nodes_html(Text) ->
    Heads = re:replace(Text, "(<text x=\"[0-9]+\" y=\"21\" text-anchor=\"middle\">)[^<]*(<title>)",
                       "\\1_\\2", [global, {return, binary}]),
    Labels = re:replace(Heads, "(<g class=\"proc\"><text x=\"4\" y=\"[0-9]+\">)[^<]*(</text>)",
                        "\\1_\\2", [global, {return, binary}]),
    Parts = re:split(Labels, "(&lt;|#Port&lt;|#Ref&lt;)([0-9]+)\\.", [{return, binary}]),
    renumber(Parts, #{}, []).

renumber([Pre, Open, N | Rest], Seen, Acc) ->
    {I, Seen1} = case Seen of
                     #{N := K} -> {K, Seen};
                     _ -> K = map_size(Seen), {K, Seen#{N => K}}
                 end,
    renumber(Rest, Seen1, [[Open, integer_to_binary(I), $.], Pre | Acc]);
renumber([Last], _, Acc) ->
    iolist_to_binary(lists:reverse([Last | Acc]));
renumber([], _, Acc) -> % re:split/3 of <<>>
    iolist_to_binary(lists:reverse(Acc)).

%% Exit statuses and one-line errors.
errors(Config) ->
    Dir = ?config(priv_dir, Config),
    Missing = filename:join(Dir, "missing"),
    {3, <<>>, E3} = run(Config, [Missing]),
    one_line(E3, "no such file"),
    NotTrace = filename:join(Dir, "not_a_trace"),
    ok = file:write_file(NotTrace, <<"hello, this is not a trace file\n">>),
    {4, <<>>, E4} = run(Config, [NotTrace]),
    one_line(E4, "not a trace file"),
    {2, <<>>, E2} = run(Config, ["--format", "nope", NotTrace]),
    ?assertMatch({match, _}, re:run(E2, "unknown format nope")),
    ?assertMatch({match, _}, re:run(E2, "usage:")),
    {2, <<>>, _} = run(Config, []),
    {2, <<>>, _} = run(Config, ["--depth", "0", NotTrace]),
    {2, <<>>, _} = run(Config, ["--since", "yesterday", NotTrace]),
    {2, <<>>, _} = run(Config, ["--bogus", NotTrace]),
    %% An export that reads nothing still writes its (empty) document.
    same_exports(Config, [Missing]),
    same_exports(Config, [NotTrace]),
    {0, Usage, <<>>} = run(Config, ["--help"]),
    ?assertMatch({match, _}, re:run(Usage, "Exit status")),
    %% A damaged chunk: the events before it, then the error and 1.
    Good = filename:join(Dir, "good"),
    rand:seed(exsss, {7, 8, 9}),
    write_chunks(Good, 50),
    {ok, Bin} = file:read_file(Good),
    Chunks = chunks(Bin),
    ?assert(length(Chunks) > 10),
    {At, _, _} = lists:nth(length(Chunks) div 2, Chunks),
    Bad = filename:join(Dir, "bad"),
    ok = file:write_file(Bad, flip_at(Bin, At + 20)),
    {{error, {corrupt, _, At}, N}, Expected} = erl_text(Config, Bad),
    ?assert(N > 0),
    {1, Got, E1} = run(Config, [Bad]),
    ?assertEqual(Expected, Got),
    one_line(E1, "at byte " ++ integer_to_list(At)),
    [{error, {corrupt, _, At}} = R || R <- same_exports(Config, [Bad])],
    %% Cut short: the same.
    Cut = filename:join(Dir, "cut"),
    ok = file:write_file(Cut, binary:part(Bin, 0, At + 30)),
    {{error, {corrupt, _, At}, _}, ExpectedCut} = erl_text(Config, Cut),
    {1, ExpectedCut, ECut} = run(Config, [Cut]),
    one_line(ECut, "cut short"),
    [{error, {corrupt, _, At}} = R || R <- same_exports(Config, [Cut])],
    %% Cut where a chunk ends, its end chunk gone (a killed writer): every
    %% event, then the file's end named; it read as complete (status 0).
    EndAt = element(1, lists:last(Chunks)),
    NoEnd = filename:join(Dir, "no_end"),
    ok = file:write_file(NoEnd, binary:part(Bin, 0, EndAt)),
    {{error, {corrupt, _, EndAt}, 50}, ExpectedNoEnd} = erl_text(Config, NoEnd),
    {1, ExpectedNoEnd, ENoEnd} = run(Config, [NoEnd]),
    one_line(ENoEnd, "cut short \\(no end chunk\\) at byte " ++ integer_to_list(EndAt)),
    [{error, {corrupt, _, EndAt}} = R || R <- same_exports(Config, [NoEnd])],
    %% --damaged skip: every event that can be read, as fold/4 with
    %% #{damaged => skip} gives them, one line per region, status 1.
    {{error, {skipped, [{_, EndAt, eof}]}, 50}, ExpectedNoEnd} =
        erl_text(Config, NoEnd, #{damaged => skip}),
    {1, ExpectedNoEnd, ESkipEnd} = run(Config, ["--damaged", "skip", NoEnd]),
    one_line(ESkipEnd, "skipped from byte " ++ integer_to_list(EndAt) ++ " to the end"),
    {{error, {skipped, [{_, At, To}]}, NSkip}, ExpectedSkip} =
        erl_text(Config, Bad, #{damaged => skip}),
    ?assert(NSkip > N),
    {1, ExpectedSkip, ESkip} = run(Config, ["--damaged=skip", Bad]),
    one_line(ESkip, "skipped bytes " ++ integer_to_list(At) ++ " to " ++ integer_to_list(To)),
    {0, All, <<>>} = run(Config, ["--damaged", "skip", Good]),
    {{ok, 50}, All} = erl_text(Config, Good),
    {2, <<>>, _} = run(Config, ["--damaged", "maybe", Good]),
    %% Cut before its magic was whole: damaged from its start, not "not a
    %% trace file".
    Stub = filename:join(Dir, "stub"),
    ok = file:write_file(Stub, <<"TKTR">>),
    {{error, {corrupt, _, 0}, 0}, <<>>} = erl_text(Config, Stub),
    {1, <<>>, EStub} = run(Config, [Stub]),
    one_line(EStub, "at byte 0"),
    {{error, {skipped, [{_, 0, eof}]}, 50}, All} = erl_text(Config, [Good, Stub],
                                                          #{damaged => skip}),
    {1, All, ESkipStub} = run(Config, ["--damaged", "skip", Good, Stub]),
    one_line(ESkipStub, "stub: skipped from byte 0 to the end"),
    %% The good file and the missing one: nothing read, status 3.
    {3, <<>>, _} = run(Config, [Good, Missing]).

one_line(Err, Has) ->
    ?assertMatch([_, <<>>], binary:split(Err, <<"\n">>)),
    ?assertMatch({match, _}, re:run(Err, "^tracekit-cat: ")),
    ?assertMatch({match, _}, re:run(Err, Has)).

%% A file of many small chunks (a flush after each event).
write_chunks(Path, N) ->
    {ok, F} = tracekit_file:new(#{path => Path}),
    Self = self(),
    [begin
         tracekit_file:trace(send, F, Self, rand_term(3), #{extra => Self}),
         ok = tracekit_file:flush(F)
     end || _ <- lists:seq(1, N)],
    ok = tracekit_file:close(F).

%% The chunks of a file: {Offset, Type, PayloadLength}.
chunks(Bin) ->
    chunks(Bin, 8, []).
chunks(Bin, At, Acc) when At + 16 =< byte_size(Bin) ->
    <<_:At/binary, _Sync:32, Type, _:24, Len:32/little, _/binary>> = Bin,
    chunks(Bin, At + 16 + Len, [{At, Type, Len} | Acc]);
chunks(_, _, Acc) ->
    lists:reverse(Acc).

flip_at(Bin, At) ->
    <<Pre:At/binary, B, Post/binary>> = Bin,
    <<Pre/binary, (B bxor 16#5a), Post/binary>>.

%% Damaged files through tracekit-cat built with AddressSanitizer and
%% UBSan (make cat-asan): random flips, cuts, and changes inside a chunk
%% whose CRC is made right again (so that the decoder sees them). Each
%% file is read as text and in one of the exports, in turn. No crash, no
%% hang, no sanitizer report; the statuses are 0 or 1; and for the chunks
%% made right again the text is the Erlang reader's and the export
%% tracekit_export's.
damaged_files(Config) ->
    Asan = case os:getenv("TRACEKIT_BUILD") of
               false -> "";
               B -> filename:join(B, "cat-asan/tracekit-cat")
           end,
    case filelib:is_regular(Asan) of
        false -> {skip, "no AddressSanitizer build of tracekit-cat (make cat-asan)"};
        true -> damaged_files(Config, Asan)
    end.

damaged_files(Config, Asan) ->
    Dir = ?config(priv_dir, Config),
    Good = filename:join(Dir, "fuzz_good"),
    rand:seed(exsss, {17, 18, 19}),
    write_chunks(Good, 60),
    {ok, Bin} = file:read_file(Good),
    Chunks = chunks(Bin),
    FuzzDir = filename:join(Dir, "fuzz"),
    ok = filelib:ensure_path(FuzzDir),
    Count = damaged_count(),
    Kinds = [begin
                 {Kind, Damaged} = damage(Bin, Chunks),
                 ok = file:write_file(filename:join(FuzzDir, integer_to_list(I)), Damaged),
                 Kind
             end || I <- lists:seq(1, Count)],
    %% One shell loop (a VM port per file would take longer than the runs).
    Script = filename:join(Dir, "fuzz.sh"),
    ok = file:write_file(Script, [
        "cd ", FuzzDir, "\n",
        %% No leak check: what a run holds until it exits (its buffers) is
        %% not freed on the way out, on purpose.
        "export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1\n",
        "export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1\n",
        "ls | grep -v '\\.' | xargs -P 2 -n 50 sh -c '",
        "for f; do timeout 20 ", Asan, " $f >$f.out 2>$f.err; s=$?; ",
        %% the export of file F: ?EXPORTS's (F rem 4 + 1)th
        "case $((f % 4)) in 0) x=jsonl;; 1) x=chrome;; 2) x=folded;; *) x=html;; esac; ",
        "timeout 20 ", Asan, " --format $x $f >$f.x 2>$f.xerr; x=$?; ",
        "timeout 20 ", Asan, " --damaged skip $f >$f.skip 2>$f.skiperr; ",
        "echo \"$f $s $x $?\" >$f.status; done' sh\n",
        "cat *.status >statuses\n"]),
    T0 = erlang:monotonic_time(millisecond),
    _ = os:cmd("sh " ++ Script),
    Ms = erlang:monotonic_time(millisecond) - T0,
    {ok, StatusText} = file:read_file(filename:join(FuzzDir, "statuses")),
    %% I => {text's status, the export's, text --damaged skip's}
    Statuses = maps:from_list([{binary_to_integer(F), {binary_to_integer(S), binary_to_integer(X),
                                                       binary_to_integer(K)}}
                               || L <- binary:split(StatusText, <<"\n">>, [global, trim]),
                                  [F, S, X, K] <- [binary:split(L, <<" ">>, [global])]]),
    ?assertEqual(Count, map_size(Statuses)),
    Bad = [{I, S, X, K, [element(2, file:read_file(filename:join(FuzzDir, integer_to_list(I) ++ Ext)))
                         || Ext <- [".err", ".xerr", ".skiperr"]]}
           || {I, {S, X, K}} <- maps:to_list(Statuses),
              not lists:member(S, [0, 1]) orelse not lists:member(X, [0, 1])
                  orelse not lists:member(K, [0, 1])],
    ?assertEqual([], Bad),
    Reports = [{I, Ext} || I <- lists:seq(1, Count), Ext <- [".err", ".xerr", ".skiperr"],
                           {ok, E} <- [file:read_file(filename:join(FuzzDir, integer_to_list(I) ++ Ext))],
                           re:run(E, "Sanitizer|runtime error") =/= nomatch],
    ?assertEqual([], Reports),
    %% Against the Erlang reader: the files whose damage passes the CRC.
    Checked = [check_damaged(Config, FuzzDir, I, maps:get(I, Statuses))
               || {I, crc_fixed} <- lists:zip(lists:seq(1, Count), Kinds)],
    %% Skipping, every kind of damage: the text and status of fold/4 with
    %% #{damaged => skip}.
    [check_skipped(Config, FuzzDir, I, element(3, maps:get(I, Statuses)))
     || I <- lists:seq(1, Count)],
    Outcomes = lists:foldl(fun(K, M) -> maps:update_with(K, fun(N) -> N + 1 end, 1, M) end,
                           #{}, Kinds ++ [{status, S} || {S, _, _} <- maps:values(Statuses)]),
    ct:log("~p damaged files in ~p ms through ~s: ~p; ~p compared with the Erlang reader",
           [Count, Ms, Asan, Outcomes, length(Checked)]),
    ?assert(length(Checked) > Count div 10).

%% How many damaged files: TRACEKIT_CAT_DAMAGED, 600 by default.
damaged_count() ->
    case os:getenv("TRACEKIT_CAT_DAMAGED") of
        N when is_list(N), N =/= "" -> list_to_integer(N);
        _ -> 600
    end.

check_damaged(Config, FuzzDir, I, {Status, XStatus, _}) ->
    F = filename:join(FuzzDir, integer_to_list(I)),
    {R, Expected} = erl_text(Config, F),
    {ok, Got} = file:read_file(F ++ ".out"),
    case R of
        {ok, _} -> ?assertEqual({I, 0}, {I, Status});
        {error, _, _} -> ?assertEqual({I, 1}, {I, Status})
    end,
    same_text(I, Expected, Got),
    Format = lists:nth(I rem 4 + 1, ?EXPORTS),
    {XR, XExpected} = erl_export(Config, Format, F),
    {ok, XGot} = file:read_file(F ++ ".x"),
    OtherNode = re:run(XExpected, "(&lt;|#Port&lt;|#Ref&lt;)[1-9][0-9]*\\.",
                       [{capture, none}]) =:= match,
    case Format of
        %% The report prints pids as the shell's format does: with another
        %% node's (see above), only a whole page.
        html when OtherNode ->
            well_formed(html, XGot);
        %% The page says why reading stopped, with the file's name as it
        %% was given: tracekit-cat ran in the directory, on the name alone.
        html ->
            Named = binary:replace(XExpected, iolist_to_binary(["&quot;", F, "&quot;"]),
                                   iolist_to_binary(["&quot;", integer_to_list(I), "&quot;"])),
            same_bytes({I, Format}, fun_uniq(Named), fun_uniq(XGot));
        _ ->
            same_bytes({I, Format}, fun_uniq(XExpected), fun_uniq(XGot))
    end,
    case XR of
        {ok, _} -> ?assertEqual({I, 0}, {I, XStatus});
        {error, Why} -> ?assertEqual({I, status(Why)}, {I, XStatus})
    end,
    ok.

%% The text of a damaged file, both ways. A damaged node name makes a
%% pid, port or reference of another node, which each reader numbers its
%% own way: the VM by its node table, tracekit-cat from 1. Lines with them
%% are cut at other places (the numbers' widths differ), so that only
%% their count is compared.
same_text(I, Expected, Got) ->
    case re:run(Expected, "(<|#Port<|#Ref<)[1-9][0-9]*\\.", [{capture, none}]) of
        nomatch ->
            ?assertEqual({I, fun_uniq(renumber(Expected))}, {I, fun_uniq(renumber(Got))});
        match ->
            Lines = fun(T) -> length(binary:split(T, <<"\n">>, [global])) end,
            ?assertEqual({I, Lines(Expected)}, {I, Lines(Got)})
    end.

%% --damaged skip against fold/4 with #{damaged => skip}: the same text,
%% the same status, and a line for each region skipped.
check_skipped(Config, FuzzDir, I, Status) ->
    F = filename:join(FuzzDir, integer_to_list(I)),
    {R, Expected} = erl_text(Config, F, #{damaged => skip}),
    {ok, Got} = file:read_file(F ++ ".skip"),
    {ok, Err} = file:read_file(F ++ ".skiperr"),
    same_text(I, Expected, Got),
    case R of
        {ok, _} ->
            ?assertEqual({I, 0, <<>>}, {I, Status, Err});
        {error, {skipped, Regions}, _} ->
            ?assertEqual({I, 1, length(Regions)},
                         {I, Status, length(binary:matches(Err, <<": skipped ">>))});
        {error, {file, _, not_a_trace}, _} ->
            ?assertEqual({I, 4}, {I, Status})
    end.

%% A local fun's old index and old uniq, which damage may change:
%% binary_to_term/1 takes them from the fun's entry when the module is
%% loaded (as the suite is), whatever the bytes say, so that only a reader
%% outside the VM prints the damaged ones.
fun_uniq(Text) ->
    re:replace(Text, "(#Fun<[^>.]*\\.)[0-9]+\\.[0-9]+>", "\\1_._>", [global, {return, binary}]).

damage(Bin, Chunks) ->
    Size = byte_size(Bin),
    case rand:uniform(4) of
        1 -> {cut, binary:part(Bin, 0, rand:uniform(Size) - 1)};
        2 -> {flipped, flip(Bin, rand:uniform(4))};
        _ -> {crc_fixed, crc_fixed(Bin, lists:nth(rand:uniform(length(Chunks)), Chunks))}
    end.

flip(Bin, 0) ->
    Bin;
flip(Bin, N) ->
    At = rand:uniform(byte_size(Bin)) - 1,
    <<Pre:At/binary, B, Post/binary>> = Bin,
    flip(<<Pre/binary, (B bxor rand:uniform(255)), Post/binary>>, N - 1).

%% Bytes changed inside one chunk's payload, its CRC computed again.
crc_fixed(Bin, {_, _, 0}) ->
    Bin;
crc_fixed(Bin, {At, _, Len}) ->
    <<Pre:At/binary, Head:8/binary, _Len:4/binary, _Crc:4/binary, Payload:Len/binary,
      Post/binary>> = Bin,
    Damaged = case rand:uniform(3) of
                  1 -> flip(Payload, rand:uniform(3));
                  2 -> Pos = rand:uniform(Len) - 1,
                       <<P1:Pos/binary, _, P2/binary>> = Payload,
                       <<P1/binary, (lists:nth(rand:uniform(6), [0, 1, 255, 131, 14, 7])), P2/binary>>;
                  3 -> Pos = rand:uniform(Len) - 1,
                       <<P1:Pos/binary, P2/binary>> = Payload,
                       <<P1/binary, (rand:uniform(200)):32/little, P2/binary>>
              end,
    NewLen = byte_size(Damaged),
    <<_:4/binary, TypeEtc:4/binary>> = Head,
    LenBin = <<NewLen:32/little>>,
    Crc = crc32c(<<TypeEtc/binary, LenBin/binary, Damaged/binary>>),
    <<Pre/binary, (binary:part(Head, 0, 4))/binary, TypeEtc/binary, LenBin/binary,
      Crc:32/little, Damaged/binary, Post/binary>>.

%% CRC-32C (Castagnoli), reflected, as FORMAT.md says.
crc32c(Bin) ->
    Table = crc_table(),
    bnot crc32c(Bin, Table, 16#FFFFFFFF) band 16#FFFFFFFF.

crc32c(<<B, Rest/binary>>, T, C) ->
    crc32c(Rest, T, (C bsr 8) bxor element(((C bxor B) band 255) + 1, T));
crc32c(<<>>, _, C) ->
    C.

crc_table() ->
    case persistent_term:get({?MODULE, crc}, undefined) of
        undefined ->
            T = list_to_tuple([crc_entry(N, 8) || N <- lists:seq(0, 255)]),
            persistent_term:put({?MODULE, crc}, T),
            T;
        T -> T
    end.

crc_entry(C, 0) -> C;
crc_entry(C, K) when C band 1 =:= 1 -> crc_entry((C bsr 1) bxor 16#82F63B78, K - 1);
crc_entry(C, K) -> crc_entry(C bsr 1, K - 1).
