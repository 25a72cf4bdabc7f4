%% tracekit-cat (priv/bin/tracekit-cat), the C reader of trace files,
%% against the Erlang reader: for every workload of tracekit_ring_SUITE
%% written to a trace file, `--format dbg' read back by dbg:trace_client/3
%% gives the events tracekit_file:read/1 gives (which tracekit_ring_SUITE
%% checks against OTP's process tracer), and the text has a line per
%% event of the file with that event's time, process and tag. The term
%% text is read back by Erlang's own parser; hand-written lines for known
%% events; filters, a wrap set, files of two nodes, errors and exit
%% statuses, and damaged files through the AddressSanitizer build.
-module(tracekit_cat_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("kernel/include/file.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, groups/0, init_per_suite/1, end_per_suite/1,
         init_per_group/2, end_per_group/2]).
-export([workloads/1, random_terms/1, text_lines/1, lost_events/1, filters/1, nodes/1,
         errors/1, damaged_files/1, wrap_set/1, private_output/1,
         interrupted_output/1]).
-export([peer_workload/2]).

-define(VARIANTS, [plain, timestamp, monotonic_timestamp,
                   strict_monotonic_timestamp, cpu_timestamp, scheduler_id]).
-define(WORKLOADS, [messages, calls, procs, running, ports, gc, seq_trace]).
%% The text's time and an event's own timestamp are two clocks read within
%% a few microseconds; a loaded machine (or a sanitizer) can stretch that.
-define(CLOCKS_APART_US, 500000).

all() ->
    [{group, variants}, random_terms, text_lines, lost_events, filters, wrap_set, nodes,
     errors, damaged_files, private_output, interrupted_output].

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
    [{flags, [timestamp]}, {cpu, true} | Config];
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

%% The events of the dbg format file tracekit-cat writes, as
%% dbg:trace_client/3 reads them back.
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

%%% The text, checked against the events -----------------------------------

%% A line of text: #{time => Microseconds, node => Node | none, process =>
%% Text, name => Text | none, tag => Text, what => Text}.
parse_line(Line, NodeColumn) ->
    Re = case NodeColumn of
             true -> "^(\\S+) (\\S+) ";
             false -> "^(\\S+) ()"
         end ++ "(<[^>]*>|#Port<[^>]*>|-)( \\((?:'(?:[^'\\\\]|\\\\.)*'|[^ )]*)\\))? "
                "(seq_trace|\\S+)(?: (.*))?$",
    case re:run(Line, Re, [{capture, all_but_first, binary}, unicode]) of
        {match, [Time, Node, Proc, Name, Tag | What]} ->
            #{time => calendar:rfc3339_to_system_time(binary_to_list(Time),
                                                      [{unit, microsecond}]),
              node => case Node of <<>> -> none; _ -> binary_to_atom(Node) end,
              process => Proc,
              name => case Name of <<>> -> none; <<" (", N/binary>> -> binary:part(N, 0, byte_size(N) - 1) end,
              tag => Tag,
              what => case What of [] -> <<>>; [W] -> W end};
        nomatch ->
            ct:fail({not_a_line_of_text, Line})
    end.

%% The lines of a text output, without the lines of lost events.
event_lines(Text) ->
    [L || L <- binary:split(Text, <<"\n">>, [global, trim]), not is_lost_line(L)].

is_lost_line(<<"-- ", _/binary>>) -> true;
is_lost_line(_) -> false.

%% The text has one line per event, in order, each with the event's
%% process (its numbers) and tag, times that never go back, and the
%% event's own time when it has a system timestamp (Clocks). Returns the
%% number of lines.
same_events(Events, Text, Opts) ->
    Lines = event_lines(Text),
    ?assertEqual(length(Events), length(Lines)),
    Parsed = [parse_line(L, maps:get(node_column, Opts, false)) || L <- Lines],
    Times = [T || #{time := T} <- Parsed],
    ?assertEqual(Times, lists:sort(Times)),
    [check_line(E, P, Opts) || {E, P} <- lists:zip(Events, Parsed)],
    length(Lines).

check_line(E, #{process := Proc, tag := Tag, time := Time} = Line, Opts) ->
    {EProc, ETag} = expected_columns(E),
    ?assertEqual({E, ETag}, {E, Tag}),
    ?assertEqual({E, numbers(EProc)}, {E, numbers(Proc)}),
    case {maps:get(clocks, Opts, false), E} of
        {true, {trace_ts, _, _, _, {Mega, Sec, Micro}}} ->
            Ts = (Mega * 1000000 + Sec) * 1000000 + Micro,
            ?assert(abs(Ts - Time) < ?CLOCKS_APART_US, {E, Line});
        {true, {trace_ts, _, _, _, _, {Mega, Sec, Micro}}} ->
            Ts = (Mega * 1000000 + Sec) * 1000000 + Micro,
            ?assert(abs(Ts - Time) < ?CLOCKS_APART_US, {E, Line});
        _ ->
            ok
    end,
    case {maps:get(node_column, Opts, false), Line} of
        {true, #{node := Node}} -> ?assertEqual({E, node(EProc)}, {E, Node});
        {false, _} -> ok
    end.

%% The process of a line (a pid or port) and its tag, from the event.
expected_columns({seq_trace, _, {'receive', _, _, To, _}}) -> {To, <<"seq_trace">>};
expected_columns({seq_trace, _, {'receive', _, _, To, _}, _}) -> {To, <<"seq_trace">>};
expected_columns({seq_trace, _, {_, _, From, _, _}}) -> {From, <<"seq_trace">>};
expected_columns({seq_trace, _, {_, _, From, _, _}, _}) -> {From, <<"seq_trace">>};
expected_columns(E) -> {element(2, E), atom_to_binary(element(3, E))}.

%% The numbers of a pid or port (the node is said apart), from the VM's
%% own printing of it or from the text.
numbers(P) when is_pid(P) -> numbers(list_to_binary(pid_to_list(P)));
numbers(P) when is_port(P) -> numbers(list_to_binary(erlang:port_to_list(P)));
numbers(<<"#Port", _/binary>> = Text) ->
    {match, Ns} = re:run(Text, "\\.([0-9]+)>$", [{capture, all_but_first, binary}]),
    Ns;
numbers(Text) ->
    {match, Ns} = re:run(Text, "\\.([0-9]+)\\.([0-9]+)>$", [{capture, all_but_first, binary}]),
    Ns.

%% The file read both ways: the dbg format gives back every event whole,
%% the text a line per event.
check_file(Config, F, Opts) ->
    {ok, Events} = tracekit_file:read(F),
    ?assertEqual(Events, dbg_events(Config, [F])),
    {0, Text, <<>>} = run(Config, [F]),
    same_events(Events, Text, Opts).

%%% Cases ----------------------------------------------------------------------

%% Every workload of tracekit_ring_SUITE, traced into trace files as its
%% file group does (one file per tracer run), each file read both ways.
workloads(Config) ->
    Flags = ?config(flags, Config),
    Root = ?config(priv_dir, Config),
    Clocks = Flags =:= [timestamp] andalso ?config(cpu, Config) =/= true,
    Counts = [begin
                  Dir = filename:join(Root, atom_to_list(W)),
                  ok = filelib:ensure_path(Dir),
                  put(tk_sink, {file, Dir}),
                  _ = tracekit_ring_SUITE:W([{flags, Flags}, {sink, file}, {priv_dir, Dir}]),
                  seq_trace:reset_trace(),
                  _ = seq_trace:set_system_tracer(false),
                  [check_file(Config, F, #{clocks => Clocks}) || F <- trace_files(Dir)]
              end || W <- ?WORKLOADS],
    ct:log("events per file: ~p", [Counts]),
    ?assert(lists:sum(lists:append(Counts)) > 100).

%% Random terms of every kind through the file tracer's own callbacks (as
%% any process may call them): the dbg format gives them back, the text
%% has a line each; and with no limits, the text of every message without
%% pids, ports, references and funs reads back, by erl_parse, as the very
%% term.
random_terms(Config) ->
    Dir = ?config(priv_dir, Config),
    Read = [begin
                Path = filename:join(Dir, "random." ++ integer_to_list(Seed)),
                rand:seed(exsss, {Seed, 2, 3}),
                write_random(Path, 2000),
                2000 = check_file(Config, Path, #{}),
                {ok, Events} = tracekit_file:read(Path),
                {0, Text, _} = run(Config, ["--depth", "100000", "--line-length", "100000000",
                                            "--tag", "receive", Path]),
                Received = [E || E <- Events, element(3, E) =:= 'receive'],
                Lines = event_lines(Text),
                ?assertEqual(length(Received), length(Lines)),
                %% (the events with no terms after the message)
                length([read_back(element(4, E), L) || {E, L} <- lists:zip(Received, Lines),
                                                       tuple_size(E) =:= 4 orelse
                                                           (tuple_size(E) =:= 5 andalso
                                                            element(1, E) =:= trace_ts),
                                                       plain(element(4, E))])
            end || Seed <- lists:seq(1, 6)],
    ct:log("messages read back: ~w", [Read]),
    ?assert(lists:sum(Read) > 200).

read_back(Msg, Line) ->
    #{what := What} = parse_line(Line, false),
    {ok, Tokens, _} = erl_scan:string(unicode:characters_to_list(What) ++ "."),
    ?assertEqual({What, {ok, Msg}}, {What, erl_parse:parse_term(Tokens)}).

%% A term that Erlang's syntax writes (no pids, ports, references, funs).
plain(T) when is_pid(T); is_port(T); is_reference(T); is_function(T) -> false;
plain([H | T]) -> plain(H) andalso plain(T);
plain(T) when is_tuple(T) -> plain(tuple_to_list(T));
plain(T) when is_map(T) -> plain(maps:to_list(T));
plain(_) -> true.

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
    case rand:uniform(26) of
        1 -> rand:uniform(1 bsl 70) - (1 bsl 69);
        2 -> case rand:uniform(3) of
                 1 -> rand:uniform() * math:pow(10, rand:uniform(40) - 20);
                 2 -> float(rand:uniform(1 bsl 62)) * (rand:uniform(2) * 2 - 3);
                 3 -> float(rand:uniform(1 bsl rand:uniform(60)))
             end;
        3 -> lists:nth(rand:uniform(11), [a, 'B', 'hello world', 'é', '', 'after', '\n',
                                          'ok', '\x{1F600}x', 'a\\b', 'it\'s']);
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
        24 -> maps:from_list([{K, rand_term(D - 1)} || K <- lists:seq(1, 40)]);
        25 -> -(1 bsl (1000 + rand:uniform(2000)));
        26 -> [8, 9, 10]
    end.

%% Known events, and the lines they must give (after the time).
text_lines(Config) ->
    Path = filename:join(?config(priv_dir, Config), "known"),
    {ok, F} = tracekit_file:new(#{path => Path}),
    Me = self(),
    P = pid_to_list(Me),
    Ref = make_ref(),
    RefText = re:replace(ref_to_list(Ref), "^#Ref<[0-9]+", "#Ref<0", [{return, list}]),
    Trace = fun(Tag, Term, Opts) -> ok = tracekit_file:trace(Tag, F, Me, Term, Opts) end,
    Known =
        [{send, {hello, "world", <<"bin">>, 1.5, #{1 => one, 2 => [1, 2 | 3]}}, #{extra => Me},
          [P, " send {hello,\"world\",<<\"bin\">>,1.5,#{1 => one,2 => [1,2|3]}} -> ", P]},
         {'receive', {<<"héllo"/utf8>>, <<1, 2, 255>>, <<1:3>>, 'Quoted atom', 'it\'s', "\b"},
          #{}, [P, " receive {<<\"héllo\"/utf8>>,<<1,2,255>>,<<1:3>>,'Quoted atom','it\\'s',[8]}"]},
         {call, {lists, seq, [1, 10]}, #{}, [P, " call lists:seq(1, 10)"]},
         {call, {m, f, [8]}, #{}, [P, " call m:f(8)"]},
         {call, {m, f, [a, b | '...']}, #{}, [P, " call m:f(a, b, ...)"]},
         {call, {'Mod', 'f g', 2}, #{}, [P, " call 'Mod':'f g'/2"]},
         {return_from, {m, f, 1}, #{extra => {ok, 2.0e20, 1.0e-5, 0.25, -0.0}},
          [P, " return_from m:f/1 -> {ok,2.0e20,1.0e-5,0.25,-0.0}"]},
         {exception_from, {m, f, 0}, #{extra => {error, badarg}},
          [P, " exception_from m:f/0 error:badarg"]},
         {'receive', {1 bsl 70, -(1 bsl 64)}, #{match_spec_result => {message, Ref}},
          [P, " receive {1180591620717411303424,-18446744073709551616} ({message,",
           RefText, "})"]},
         {'receive', 1 bsl 1100, #{scheduler_id => 2},
          [P, " receive 16#1", lists:duplicate(275, $0), " (2)"]},
         {register, worker, #{}, [P, " (worker) register worker"]},
         {link, Me, #{}, [P, " (worker) link ", P, " (worker)"]},
         {in, {m, f, 2}, #{}, [P, " (worker) in m:f/2"]},
         {out, 0, #{}, [P, " (worker) out 0"]},
         {exit, {shutdown, {a, {b, {c, {d}}}}}, #{},
          [P, " (worker) exit {shutdown,{a,{b,{c,...}}}}"]}],
    [Trace(Tag, Term, Opts) || {Tag, Term, Opts, _} <- Known],
    ok = tracekit_file:close(F),
    {0, Text, <<>>} = run(Config, ["--depth", "4", "--line-length", "1000", Path]),
    Lines = binary:split(Text, <<"\n">>, [global, trim]),
    ?assertEqual(length(Known), length(Lines)),
    [?assertEqual(unicode:characters_to_binary(Expected), after_time(L))
     || {{_, _, _, Expected}, L} <- lists:zip(Known, Lines)],
    %% Cut at the line length, in characters.
    {0, Cut, <<>>} = run(Config, ["--line-length", "40", "--tag", "receive", Path]),
    [First | _] = binary:split(Cut, <<"\n">>),
    ?assertEqual(40, string:length(First)),
    ?assertMatch(<<_:28/binary, "<", _/binary>>, First),
    ?assertEqual(<<"...">>, binary:part(First, byte_size(First) - 3, 3)).

after_time(Line) ->
    [_Time, Rest] = binary:split(Line, <<" ">>),
    Rest.

%% Events the writer could not keep: a line says how many, where they
%% were lost; the dbg format hands them on as dbg's drop count.
lost_events(Config) ->
    Path = filename:join(?config(priv_dir, Config), "lost"),
    {ok, F} = tracekit_file:new(#{path => Path, buffer => 4096}),
    Me = self(),
    [tracekit_file:trace(send, F, Me, {msg, I, lists:seq(1, 50)}, #{extra => Me})
     || I <- lists:seq(1, 2000)],
    ok = tracekit_file:flush(F),
    ok = tracekit_file:trace(send, F, Me, last, #{extra => Me}),
    ok = tracekit_file:close(F),
    #{dropped := Dropped, written := Written} = tracekit_file:stats(F),
    ?assert(Dropped > 0),
    {0, Text, <<>>} = run(Config, [Path]),
    Lines = binary:split(Text, <<"\n">>, [global, trim]),
    Lost = [L || L <- Lines, is_lost_line(L)],
    ?assertEqual([iolist_to_binary(["-- ", integer_to_list(Dropped),
                                    " events lost: the writer could not keep them"])], Lost),
    ?assertEqual(Written, length(Lines) - 1),
    ?assertMatch({match, _}, re:run(lists:last(Lines), " send last -> ")),
    Dbg = dbg_events(Config, [Path]),
    ?assertEqual([{drop, Dropped}], [D || {drop, _} = D <- Dbg]).

%% --tag, --pid, --since, --until, --node: the lines of the unfiltered
%% text whose events pass.
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
    %% A registered name: the events of the processes since they
    %% registered it.
    {0, Named, _} = run(Config, ["--pid", "cat_filter_w", Path]),
    OfName = named_since(cat_filter_w, Events),
    ?assertNotEqual([], OfName),
    ?assertEqual(Expect(fun(E) -> lists:member(E, OfName) end), Named),
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
    N = check_file(Config, Base, #{}),
    ?assert(N > 100).

%% Files written on two peer nodes, read together here: merged by time as
%% tracekit_file:read/1 merges them, each line beginning with its node.
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
    {ok, Events} = tracekit_file:read(Files),
    ?assert(length(Events) > 400),
    ?assertEqual(Events, dbg_events(Config, Files)),
    {0, Text, _} = run(Config, Files),
    same_events(Events, Text, #{node_column => true}),
    [{_, Node1} | _] = Peers,
    {0, One, _} = run(Config, ["--node", atom_to_list(Node1) | Files]),
    {ok, OfNode1} = tracekit_file:read(hd(Files)),
    same_events(OfNode1, One, #{node_column => true}),
    %% One node's file alone: no node column.
    {0, Alone, _} = run(Config, [hd(Files)]),
    same_events(OfNode1, Alone, #{}).

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
    %% The exports are the Erlang side's: the usage says which function.
    [begin
         {2, <<>>, EX} = run(Config, ["--format", X, NotTrace]),
         ?assertMatch({match, _}, re:run(EX, "written by " ++ Fun))
     end || {X, Fun} <- [{"chrome", "tracekit_export:chrome/2"},
                         {"jsonl", "tracekit_export:jsonl/2"},
                         {"folded", "tracekit_export:folded/2"},
                         {"html", "tracekit_report:write/2"}]],
    {2, <<>>, _} = run(Config, []),
    {2, <<>>, _} = run(Config, ["--depth", "0", NotTrace]),
    {2, <<>>, _} = run(Config, ["--since", "yesterday", NotTrace]),
    {2, <<>>, _} = run(Config, ["--bogus", NotTrace]),
    {0, Usage, <<>>} = run(Config, ["--help"]),
    ?assertMatch({match, _}, re:run(Usage, "Exit status")),
    ?assertMatch({match, _}, re:run(Usage, "tracekit_export:chrome")),
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
    {error, {corrupt, _, At}, Before} = tracekit_file:read(Bad),
    ?assert(length(Before) > 0),
    {1, Got, E1} = run(Config, [Bad]),
    same_events(Before, Got, #{}),
    one_line(E1, "at byte " ++ integer_to_list(At)),
    %% Cut short: the same.
    Cut = filename:join(Dir, "cut"),
    ok = file:write_file(Cut, binary:part(Bin, 0, At + 30)),
    {error, {corrupt, _, At}, BeforeCut} = tracekit_file:read(Cut),
    {1, GotCut, ECut} = run(Config, [Cut]),
    same_events(BeforeCut, GotCut, #{}),
    one_line(ECut, "cut short"),
    %% Cut where a chunk ends, its end chunk gone (a killed writer): every
    %% event, then the file's end named; it read as complete (status 0).
    EndAt = element(1, lists:last(Chunks)),
    NoEnd = filename:join(Dir, "no_end"),
    ok = file:write_file(NoEnd, binary:part(Bin, 0, EndAt)),
    {ok, GoodEvs} = tracekit_file:read(Good),
    ?assertEqual(50, length(GoodEvs)),
    ?assertEqual({error, {corrupt, NoEnd, EndAt}, GoodEvs}, tracekit_file:read(NoEnd)),
    {1, GotNoEnd, ENoEnd} = run(Config, [NoEnd]),
    same_events(GoodEvs, GotNoEnd, #{}),
    one_line(ENoEnd, "cut short \\(no end chunk\\) at byte " ++ integer_to_list(EndAt)),
    %% --damaged skip: every event fold/4 with #{damaged => skip} gives,
    %% one line per region skipped, status 1.
    ?assertEqual({error, {skipped, [{NoEnd, EndAt, eof}]}, GoodEvs}, fold_skip(NoEnd)),
    {1, GotSkipEnd, ESkipEnd} = run(Config, ["--damaged", "skip", NoEnd]),
    same_events(GoodEvs, GotSkipEnd, #{}),
    one_line(ESkipEnd, "skipped from byte " ++ integer_to_list(EndAt) ++ " to the end"),
    %% (The damaged chunk may be a dictionary chunk: the events chunks
    %% that refer to its entries are skipped too, each a region.)
    {error, {skipped, [{Bad, At, To} | _] = Regions}, SkipBad} = fold_skip(Bad),
    ?assert(length(SkipBad) > length(Before)),
    {1, GotSkipBad, ESkip} = run(Config, ["--damaged=skip", Bad]),
    same_events(SkipBad, GotSkipBad, #{}),
    ?assertEqual([skip_line(Region) || Region <- Regions],
                 binary:split(ESkip, <<"\n">>, [global, trim])),
    ?assertMatch({match, _}, re:run(ESkip, "skipped bytes " ++ integer_to_list(At) ++ " to "
                                    ++ integer_to_list(To))),
    {1, SkipDbg, _} = run(Config, ["--damaged", "skip", "--format", "dbg", Bad]),
    ?assertEqual(SkipBad, dbg_terms(SkipDbg)),
    {0, All, <<>>} = run(Config, [Good]),
    {0, All, <<>>} = run(Config, ["--damaged", "skip", Good]),
    {2, <<>>, _} = run(Config, ["--damaged", "maybe", Good]),
    %% Cut before its magic was whole (a writer killed as it made the
    %% file): damaged from its start, not "not a trace file".
    Stub = filename:join(Dir, "stub"),
    ok = file:write_file(Stub, <<"TKTR">>),
    ?assertEqual({error, {corrupt, Stub, 0}, []}, tracekit_file:read(Stub)),
    {1, <<>>, EStub} = run(Config, [Stub]),
    one_line(EStub, "at byte 0"),
    ?assertEqual({error, {skipped, [{Stub, 0, eof}]}, GoodEvs}, fold_skip([Good, Stub])),
    {1, GotStub, ESkipStub} = run(Config, ["--damaged", "skip", Good, Stub]),
    same_events(GoodEvs, GotStub, #{node_column => true}),
    one_line(ESkipStub, "stub: skipped from byte 0 to the end"),
    %% The good file and the missing one: nothing read, status 3.
    {3, <<>>, _} = run(Config, [Good, Missing]).

%% tracekit-cat's line for a region fold/4 skipped.
skip_line({File, From, eof}) ->
    iolist_to_binary(io_lib:format("tracekit-cat: ~ts: skipped from byte ~w to the end",
                                   [File, From]));
skip_line({File, From, To}) ->
    iolist_to_binary(io_lib:format("tracekit-cat: ~ts: skipped bytes ~w to ~w",
                                   [File, From, To])).

%% The events of a source as fold/4 with #{damaged => skip} gives them,
%% in order.
fold_skip(Source) ->
    case tracekit_file:fold(fun(E, A) -> [E | A] end, [], Source, #{damaged => skip}) of
        {ok, Evs} -> {ok, lists:reverse(Evs)};
        {error, Why, Evs} -> {error, Why, lists:reverse(Evs)}
    end.

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
%% file is read as text and in dbg's format, and with --damaged skip. No
%% crash, no hang, no sanitizer report; the statuses are 0 or 1; for the
%% chunks made right again the status is the Erlang reader's, the dbg
%% format holds the events it reads, and the text has a line for each;
%% skipping gives the events, status and regions of fold/4 skipping.
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
        "export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1\n",
        "ls | grep -v '\\.' | xargs -P 2 -n 50 sh -c '",
        %% Leaks too, on a tenth of the files (a run frees what it read on
        %% every way out; the check costs a while at each exit).
        "for f; do export ASAN_OPTIONS=detect_leaks=$((f % 10 == 0)):abort_on_error=1; ",
        "timeout 20 ", Asan, " $f >$f.out 2>$f.err; s=$?; ",
        "timeout 20 ", Asan, " --format dbg $f >$f.dbg 2>$f.xerr; x=$?; ",
        "timeout 20 ", Asan, " --damaged skip --format dbg $f >$f.skip 2>$f.skiperr; ",
        "echo \"$f $s $x $?\" >$f.status; done' sh\n",
        "cat *.status >statuses\n"]),
    T0 = erlang:monotonic_time(millisecond),
    _ = os:cmd("sh " ++ Script),
    Ms = erlang:monotonic_time(millisecond) - T0,
    {ok, StatusText} = file:read_file(filename:join(FuzzDir, "statuses")),
    %% I => {text's status, dbg's, dbg --damaged skip's}
    Statuses = maps:from_list([{binary_to_integer(F), {binary_to_integer(S), binary_to_integer(X),
                                                       binary_to_integer(K)}}
                               || L <- binary:split(StatusText, <<"\n">>, [global, trim]),
                                  [F, S, X, K] <- [binary:split(L, <<" ">>, [global])]]),
    ?assertEqual(Count, map_size(Statuses)),
    Bad = [{I, S, X, K, [element(2, file:read_file(filename:join(FuzzDir, integer_to_list(I) ++ Ext)))
                         || Ext <- [".err", ".xerr", ".skiperr"]]}
           || {I, {S, X, K}} <- maps:to_list(Statuses),
              not lists:member(S, [0, 1]) orelse S =/= X orelse not lists:member(K, [0, 1])],
    ?assertEqual([], Bad),
    Reports = [{I, Ext} || I <- lists:seq(1, Count), Ext <- [".err", ".xerr", ".skiperr"],
                           {ok, E} <- [file:read_file(filename:join(FuzzDir, integer_to_list(I) ++ Ext))],
                           re:run(E, "Sanitizer|runtime error") =/= nomatch],
    ?assertEqual([], Reports),
    %% Against the Erlang reader: the files whose damage passes the CRC.
    Checked = [check_damaged(FuzzDir, I, maps:get(I, Statuses))
               || {I, crc_fixed} <- lists:zip(lists:seq(1, Count), Kinds)],
    %% Skipping, every kind of damage: the events, status and regions of
    %% fold/4 with #{damaged => skip}.
    [check_skipped(FuzzDir, I, element(3, maps:get(I, Statuses))) || I <- lists:seq(1, Count)],
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

check_damaged(FuzzDir, I, {Status, _, _}) ->
    F = filename:join(FuzzDir, integer_to_list(I)),
    {Expected, Events} = case tracekit_file:read(F) of
                             {ok, Es} -> {0, Es};
                             {error, _, Es} -> {1, Es}
                         end,
    ?assertEqual({I, Expected}, {I, Status}),
    {ok, Dbg} = file:read_file(F ++ ".dbg"),
    ?assertEqual({I, Events}, {I, dbg_terms(Dbg)}),
    {ok, Text} = file:read_file(F ++ ".out"),
    ?assertEqual({I, length(Events)}, {I, length(event_lines(Text))}).

%% --damaged skip against fold/4 with #{damaged => skip}: the same events
%% (in dbg's format), the same status, and a line for each region skipped.
check_skipped(FuzzDir, I, Status) ->
    F = filename:join(FuzzDir, integer_to_list(I)),
    {ok, Dbg} = file:read_file(F ++ ".skip"),
    {ok, Err} = file:read_file(F ++ ".skiperr"),
    case fold_skip(F) of
        {ok, Events} ->
            ?assertEqual({I, 0, <<>>, Events}, {I, Status, Err, dbg_terms(Dbg)});
        {error, {skipped, Regions}, Events} ->
            ?assertEqual({I, 1, length(Regions), Events},
                         {I, Status, length(binary:matches(Err, <<": skipped ">>)),
                          dbg_terms(Dbg)});
        {error, {file, _, not_a_trace}, []} ->
            ?assertEqual({I, 4}, {I, Status})
    end.

%% The events of a dbg format file, by its framing.
dbg_terms(<<0, Size:32, Term:Size/binary, Rest/binary>>) ->
    [binary_to_term(Term) | dbg_terms(Rest)];
dbg_terms(<<1, _:32, Rest/binary>>) ->
    dbg_terms(Rest);
dbg_terms(<<>>) ->
    [].

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

%% -o holds message contents: written 0600, never through a link planted
%% at its name (the link is replaced), an old file of the name replaced,
%% nothing left beside it; an output that cannot be made leaves the name
%% as it was.
private_output(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "private_output"),
    ok = file:make_dir(Dir),
    Trace = filename:join(?config(priv_dir, Config), "private_output.tkt"),
    write_chunks(Trace, 5),
    Victim = filename:join(Dir, "victim"),
    Out = filename:join(Dir, "out.txt"),
    ok = file:write_file(Victim, <<"untouched">>),
    ok = file:make_symlink(Victim, Out),
    {0, <<>>, <<>>} = run(Config, ["-o", Out, Trace]),
    ?assertEqual({ok, <<"untouched">>}, file:read_file(Victim)),
    {ok, #file_info{type = regular, mode = Mode}} = file:read_link_info(Out),
    ?assertEqual(8#600, Mode band 8#777),
    {0, Text, <<>>} = run(Config, [Trace]),
    ?assertEqual({ok, Text}, file:read_file(Out)),
    {0, <<>>, <<>>} = run(Config, ["--format", "dbg", "-o", Out, Trace]),
    ?assertNotEqual({ok, Text}, file:read_file(Out)),
    {5, <<>>, E5} = run(Config, ["-o", Dir, Trace]),
    one_line(E5, "not a regular file"),
    ?assertEqual(["out.txt", "victim"], lists:sort(element(2, file:list_dir(Dir)))).


%% -o stopped part way by a signal (^C, kill, a closed terminal): the part
%% written (message contents, under a hidden name beside the output) is
%% removed, as a failed run's is, and the output's name is not made.
interrupted_output(Config) ->
    Trace = filename:join(?config(priv_dir, Config), "interrupted.tkt"),
    {ok, F} = tracekit_file:new(#{path => Trace, buffer => 64 * 1024 * 1024}),
    Self = self(),
    %% (Big enough that tracekit-cat is still writing when signalled:
    %% records hold small integers in 2 or 3 bytes.)
    Msg = {lists:seq(1, 100), <<"secret">>},
    [tracekit_file:trace(send, F, Self, Msg, #{extra => Self}) || _ <- lists:seq(1, 300000)],
    ok = tracekit_file:close(F),
    %% A signal this VM ignores is ignored by the programs it starts (a
    %% run in the background ignores SIGINT, under nohup SIGHUP), and
    %% tracekit-cat leaves it so, as a shell's background job does.
    Ignored = ignored_signals(),
    Sigs = [Sig || {Sig, N} <- [{"INT", 2}, {"TERM", 15}, {"HUP", 1}],
                   not lists:member(N, Ignored)],
    ct:log("signals ignored by this VM: ~w; sent: ~p", [Ignored, Sigs]),
    ?assert(lists:member("TERM", Sigs)),
    [interrupted_output(Config, Trace, Sig) || Sig <- Sigs].

%% The signals this OS process ignores (Linux: /proc/self/status).
ignored_signals() ->
    case file:read_file("/proc/" ++ os:getpid() ++ "/status") of
        {ok, B} ->
            case re:run(B, "SigIgn:\\s*([0-9a-f]+)", [{capture, all_but_first, list}]) of
                {match, [Hex]} ->
                    Mask = list_to_integer(Hex, 16),
                    [N || N <- lists:seq(1, 64), Mask band (1 bsl (N - 1)) =/= 0];
                nomatch ->
                    []
            end;
        {error, _} ->
            []
    end.

interrupted_output(Config, Trace, Sig) ->
    interrupted_output(Config, Trace, Sig, 5).

%% tracekit-cat is stopped (SIGSTOP) once its hidden file is there, and
%% signalled only if it is still there then: the signal comes while the
%% output is being written. When tracekit-cat had already finished (it
%% won the race on a loaded machine), that try says nothing; it is made
%% again, up to Tries times.
interrupted_output(Config, Trace, Sig, Tries) when Tries > 0 ->
    Dir = filename:join(?config(priv_dir, Config),
                        "interrupted_" ++ Sig ++ "_" ++ integer_to_list(Tries)),
    ok = file:make_dir(Dir),
    Out = filename:join(Dir, "out.txt"),
    Port = open_port({spawn_executable, ?config(cat, Config)},
                     [{args, ["-o", Out, Trace]}, exit_status]),
    {os_pid, OsPid} = erlang:port_info(Port, os_pid),
    Pid = integer_to_list(OsPid),
    ok = until_hidden(Dir, 20000),
    _ = os:cmd("kill -STOP " ++ Pid),
    case file:list_dir(Dir) of
        {ok, [".tracekit-cat-" ++ _]} ->
            _ = os:cmd("kill -" ++ Sig ++ " " ++ Pid ++ "; kill -CONT " ++ Pid),
            Status = receive {Port, {exit_status, S}} -> S after 60000 -> timeout end,
            ct:pal("SIG~s: exit status ~p, left ~p", [Sig, Status, file:list_dir(Dir)]),
            ?assertNotEqual(0, Status),
            ?assertEqual({ok, []}, file:list_dir(Dir));
        {ok, Left} ->
            _ = os:cmd("kill -CONT " ++ Pid),
            Status = receive {Port, {exit_status, S}} -> S after 60000 -> timeout end,
            ct:pal("SIG~s: tracekit-cat had finished (~p, ~p); again", [Sig, Status, Left]),
            interrupted_output(Config, Trace, Sig, Tries - 1)
    end;
interrupted_output(_Config, _Trace, Sig, 0) ->
    ct:fail({"tracekit-cat finished before it could be signalled, five times", Sig}).

until_hidden(Dir, Ms) when Ms > 0 ->
    case file:list_dir(Dir) of
        {ok, [".tracekit-cat-" ++ _]} -> ok;
        {ok, []} -> timer:sleep(1), until_hidden(Dir, Ms - 1)
    end.
