-module(tracekit_format_tests).

-include_lib("eunit/include/eunit.hrl").

line(E) -> line(E, #{}).
line(E, Opts) -> unicode:characters_to_list(tracekit_format:event(E, Opts)).

p(S) -> list_to_pid(S).

events_test_() ->
    A = p("<0.1.0>"), B = p("<0.2.0>"),
    Names = #{names => #{B => my_server}},
    [?_assertEqual("<0.1.0> m:f(1, {a,\"s\"}, <<\"b\">>)",
                   line({trace, A, call, {m, f, [1, {a, "s"}, <<"b">>]}})),
     ?_assertEqual("<0.1.0> m:f/2", line({trace, A, call, {m, f, 2}})),
     ?_assertEqual("<0.1.0> m:f() ({note,1})", line({trace, A, call, {m, f, []}, {note, 1}})),
     ?_assertEqual("<0.1.0> m:f/3 -> {reply,ok,#{}}",
                   line({trace, A, return_from, {m, f, 3}, {reply, ok, #{}}})),
     ?_assertEqual("<0.1.0> m:f/1 raised error:badarg",
                   line({trace, A, exception_from, {m, f, 1}, {error, badarg}})),
     ?_assertEqual("<0.1.0> returned to m:g/0", line({trace, A, return_to, {m, g, 0}})),
     ?_assertEqual("<0.1.0> ! {hello} -> <0.2.0> (my_server)",
                   line({trace, A, send, {hello}, B}, Names)),
     ?_assertEqual("<0.1.0> ! {ok} -> alias #Ref<0.1.2.3>",
                   line({trace, A, send, {ok}, list_to_ref("#Ref<0.1.2.3>")})),
     ?_assertEqual("<0.1.0> ! hi -> <0.2.0> (no such process)",
                   line({trace, A, send_to_non_existing_process, hi, B})),
     ?_assertEqual("<0.2.0> (my_server) << {hello}", line({trace, B, 'receive', {hello}}, Names)),
     ?_assertEqual("<0.1.0> spawned <0.2.0> as m:init(x)",
                   line({trace, A, spawn, B, {m, init, [x]}})),
     ?_assertEqual("<0.2.0> was spawned by <0.1.0> as m:init(x)",
                   line({trace, B, spawned, A, {m, init, [x]}})),
     ?_assertEqual("<0.1.0> exited: {shutdown,x}", line({trace, A, exit, {shutdown, x}})),
     ?_assertEqual("<0.1.0> linked to <0.2.0>", line({trace, A, link, B})),
     ?_assertEqual("<0.1.0> unlinked from <0.2.0>", line({trace, A, unlink, B})),
     ?_assertEqual("<0.1.0> got linked by <0.2.0>", line({trace, A, getting_linked, B})),
     ?_assertEqual("<0.1.0> got unlinked by <0.2.0>", line({trace, A, getting_unlinked, B})),
     ?_assertEqual("<0.1.0> registered as srv", line({trace, A, register, srv})),
     ?_assertEqual("<0.1.0> unregistered srv", line({trace, A, unregister, srv})),
     ?_assertEqual("<0.1.0> in m:loop/1", line({trace, A, in, {m, loop, 1}})),
     ?_assertEqual("<0.1.0> gc_minor_start [{heap_size,10}]",
                   line({trace, A, gc_minor_start, [{heap_size, 10}]})),
     ?_assertEqual("seq_trace 7: <0.1.0> ! x -> <0.2.0> [0,1]",
                   line({seq_trace, 7, {send, {0, 1}, A, B, x}})),
     ?_assertEqual("seq_trace 7: <0.2.0> << x from <0.1.0> [0,1]",
                   line({seq_trace, 7, {'receive', {0, 1}, A, B, x}})),
     ?_assertEqual("seq_trace 7: <0.1.0> print hi [0,1]",
                   line({seq_trace, 7, {print, {0, 1}, A, [], hi}})),
     ?_assertEqual("{something,'else'}", line({something, 'else'}))].

%% The time comes first, as local time with microseconds; the stamp is
%% the last element whatever the event.
time_test_() ->
    A = p("<0.1.0>"),
    Ts = {1700, 0, 123},
    {_, {H, M, S}} = calendar:system_time_to_local_time(1700000000, second),
    Time = lists:flatten(io_lib:format("~2..0w:~2..0w:~2..0w.000123", [H, M, S])),
    [?_assertEqual(Time ++ " <0.1.0> m:f/1 -> ok",
                   line({trace_ts, A, return_from, {m, f, 1}, ok, Ts})),
     ?_assertEqual(Time ++ " <0.1.0> << x", line({trace_ts, A, 'receive', x, Ts})),
     ?_assertEqual(Time ++ " seq_trace 1: <0.1.0> print p [0,1]",
                   line({seq_trace, 1, {print, {0, 1}, A, [], p}, Ts}))].

shortened_test_() ->
    A = p("<0.1.0>"),
    Long = lists:seq(1, 1000),
    [%% Depth: elements beyond it become ...
     ?_assertEqual("<0.1.0> << [1,2,3|...]", line({trace, A, 'receive', Long}, #{depth => 4})),
     ?_assertEqual("<0.1.0> << {a,{...}}",
                   line({trace, A, 'receive', {a, {b, {c, {d}}}}}, #{depth => 3})),
     ?_assertEqual("<0.1.0> << {a,{b,{...}}}",
                   line({trace, A, 'receive', {a, {b, {c, {d}}}}}, #{depth => 5})),
     %% Line length: the whole line is cut and ends in ...
     ?_test(begin
                L = line({trace, A, 'receive', Long}, #{depth => 10000, line_length => 60}),
                ?assertEqual(60, length(L)),
                ?assertEqual("...", lists:nthtail(57, L))
            end),
     %% Never more than one line, whatever the term.
     ?_assertEqual(nomatch, string:find(line({trace, A, 'receive',
                                              lists:duplicate(50, {key, "value"})}), "\n"))].

summary_test_() ->
    S = fun(M) -> lists:flatten(tracekit_format:summary(M)) end,
    [?_assertEqual("tracekit: 100 events shown, 999900 dropped; stopped at the limit of 100 events",
                   S(#{reason => {max_events, 100}, shown => 100, dropped => 999900})),
     ?_assertEqual("tracekit: 1 event shown, 0 dropped; stopped at the time limit of 15000 ms",
                   S(#{reason => {max_time, 15000}, shown => 1, dropped => 0})),
     ?_assertEqual("tracekit: 10 events shown, 3 dropped; stopped: more than 10 events within 5 ms",
                   S(#{reason => {rate, {10, 5}}, shown => 10, dropped => 3})),
     ?_assertEqual("tracekit: 0 events shown, 0 dropped; stopped by tracekit:stop",
                   S(#{reason => stopped, shown => 0, dropped => 0})),
     ?_assertEqual("tracekit: 2 events shown, 0 dropped; stopped: the process that started the trace exited",
                   S(#{reason => caller_down, shown => 2, dropped => 0}))].

names_test() ->
    Self = self(),
    register(tracekit_format_tests_name, Self),
    try
        Dead = spawn(fun() -> ok end),
        timer:sleep(10),
        ?assertEqual(#{Self => tracekit_format_tests_name},
                     tracekit_format:names([Self, Dead, whereis(init)] -- [whereis(init)]))
    after
        unregister(tracekit_format_tests_name)
    end.

%%% What a ring with a payload limit hands out --------------------------------

%% Arguments cut by the ring: all of them ('...'), or a list that ends in
%% '...'; binaries and funs cut to {'...', Prefix, Size} and
%% {'...', fun, Name}; the marker anywhere else.
cut_terms_test_() ->
    A = p("<0.1.0>"), B = p("<0.2.0>"),
    Bin = {'...', <<"abc">>, 1000},
    Fun = {'...', 'fun', <<"#Fun<m.0.1>">>},
    [?_assertEqual("<0.1.0> m:f(...)", line({trace, A, call, {m, f, '...'}})),
     ?_assertEqual("<0.1.0> m:f(a, ...)", line({trace, A, call, {m, f, [a | '...']}})),
     ?_assertEqual("<0.1.0> m:f('...', ...)", line({trace, A, call, {m, f, ['...' | '...']}})),
     ?_assertEqual("<0.1.0> m:f([1,2|'...'], ...)",
                   line({trace, A, call, {m, f, [[1, 2 | '...'] | '...']}})),
     ?_assertEqual("<0.1.0> m:f({'...',<<\"abc\">>,1000}, {'...','fun',<<\"#Fun<m.0.1>\">>})",
                   line({trace, A, call, {m, f, [Bin, Fun]}})),
     ?_assertEqual("<0.1.0> spawned <0.2.0> as m:init(x, ...)",
                   line({trace, A, spawn, B, {m, init, [x | '...']}})),
     ?_assertEqual("<0.2.0> was spawned by <0.1.0> as m:init(...)",
                   line({trace, B, spawned, A, {m, init, '...'}})),
     ?_assertEqual("<0.1.0> m:f/2 -> {'...','...'}",
                   line({trace, A, return_from, {m, f, 2}, {'...', '...'}})),
     ?_assertEqual("<0.1.0> ! [1|'...'] -> <0.2.0>", line({trace, A, send, [1 | '...'], B})),
     ?_assertEqual("<0.1.0> << '...'", line({trace, A, 'receive', '...'})),
     ?_assertEqual("<0.1.0> exited: '...'", line({trace, A, exit, '...'})),
     ?_assertEqual("<0.1.0> m:f/1 raised error:'...'",
                   line({trace, A, exception_from, {m, f, 1}, {error, '...'}})),
     ?_assertEqual("<0.1.0> exception_from m:f/1 ('...')",
                   line({trace, A, exception_from, {m, f, 1}, '...'})),
     ?_assertEqual("<0.1.0> call '...'", line({trace, A, call, '...'})),
     ?_assertEqual("'...' m:f(1)", line({trace, '...', call, {m, f, [1]}})),
     ?_assertEqual("seq_trace 1: <0.1.0> ! '...' -> <0.2.0> [0,1]",
                   line({seq_trace, 1, {send, {0, 1}, A, B, '...'}})),
     %% An improper list that does not end in the marker.
     ?_assertEqual("<0.1.0> m:f(a | b)", line({trace, A, call, {m, f, [a | b]}}))].

%% Whatever the term, a line and no crash: events of every tag with the
%% marker, cut terms and odd terms in every position, and terms that are
%% not events at all.
any_term_gives_a_line_test() ->
    A = p("<0.1.0>"),
    Odd = ['...', [a | '...'], ['...' | '...'], {'...', <<"ab">>, 100},
           {'...', 'fun', <<"#Fun<x>">>}, [], 1 bsl 300, -5, x, <<1:3>>, #{a => '...'},
           A, make_ref(), fun() -> ok end, [x | y], {}, {m, f, '...'}, {m, f, [a | b]},
           {'...', '...', '...'}, {1, 2, 3}],
    Tags = [call, return_from, exception_from, return_to, send,
            send_to_non_existing_process, 'receive', spawn, spawned, exit, link, unlink,
            getting_linked, getting_unlinked, register, unregister, in, gc_minor_start,
            '...', 42],
    Stamps = [{1, 2, 3}, {1 bsl 80, 0, 0}, {-1, -1, -1}, {0, 0, 99999999}, '...', x],
    Events = [list_to_tuple([trace, P, T | Rest])
              || P <- [A, '...'], T <- Tags,
                 Rest <- [[]] ++ [[X] || X <- Odd] ++ [[X, Y] || X <- Odd, Y <- Odd]]
        ++ [list_to_tuple([trace_ts, A, T, X, S]) || T <- Tags, X <- Odd, S <- Stamps]
        ++ [{trace}, {trace, A}, {trace_ts}, {trace_ts, a, b, c}, {seq_trace},
            {seq_trace, '...', '...'}, {seq_trace, 1, {send, '...', A, A, '...'}, '...'}]
        ++ Odd,
    Failed = [E || E <- Events,
                   not (try is_list(line(E)) catch _:_ -> false end)],
    ?assertEqual([], Failed),
    ?assert(length(Events) > 10000).

%% A stamp the calendar cannot place is shown as it is.
odd_stamps_test_() ->
    A = p("<0.1.0>"),
    [?_assertEqual("{1208925819614629174706176,0,0} <0.1.0> << x",
                   line({trace_ts, A, 'receive', x, {1 bsl 80, 0, 0}})),
     ?_assertEqual("{0,0,1000000} <0.1.0> << x", line({trace_ts, A, 'receive', x, {0, 0, 1000000}}))].

%% Options that are not options raise badarg, from every function.
bad_options_test_() ->
    E = {trace, p("<0.1.0>"), 'receive', x},
    [?_assertError(badarg, tracekit_format:event(E, x)),
     ?_assertError(badarg, tracekit_format:event(E, #{depth => 0})),
     ?_assertError(badarg, tracekit_format:event(E, #{depth => infinity})),
     ?_assertError(badarg, tracekit_format:event(E, #{line_length => 0})),
     ?_assertError(badarg, tracekit_format:event(E, #{names => [x]})),
     ?_assertError(badarg, tracekit_format:term(x, #{depth => -1})),
     ?_assertError(badarg, tracekit_format:names(x)),
     ?_assertError(badarg, tracekit_format:names([p("<0.1.0>") | x])),
     ?_assertError(badarg, tracekit_format:summary(#{shown => 1})),
     ?_assertError(badarg, tracekit_format:message_label(x, 0)),
     ?_assertError(badarg, tracekit_format:message_label(x, infinity)),
     %% Very short lines are still cut to their length.
     ?_assertEqual("..", line(E, #{line_length => 2})),
     ?_assertEqual("<0...", line(E, #{line_length => 5}))].

io_timeout_summary_test() ->
    ?assertEqual("tracekit: 3 events shown, 0 dropped; stopped: the io device did not "
                 "print a line within 5000 ms",
                 lists:flatten(tracekit_format:summary(#{reason => {io_timeout, 5000},
                                                         shown => 3, dropped => 0}))).

%%% What the shell and the CT hook turn on ------------------------------------

-define(DEFS, #{{state, 3} => [count, name, items], {empty, 0} => []}).

records_test_() ->
    A = p("<0.1.0>"),
    O = #{records => ?DEFS},
    [?_assertEqual("<0.1.0> m:f(#state{count = 3,name = x,items = []})",
                   line({trace, A, call, {m, f, [{state, 3, x, []}]}}, O)),
     ?_assertEqual("<0.1.0> m:f/1 -> {reply,ok,#state{count = 1,name = #empty{},items = [a]}}",
                   line({trace, A, return_from, {m, f, 1}, {reply, ok, {state, 1, {empty}, [a]}}}, O)),
     %% Another size, another name: a tuple.
     ?_assertEqual("<0.1.0> << {{state,1,2},{other,1,2,3}}",
                   line({trace, A, 'receive', {{state, 1, 2}, {other, 1, 2, 3}}}, O)),
     %% In maps and lists, and cut by the depth.
     ?_assertEqual("<0.1.0> << #{k => [#state{count = 1,name = 2,items = 3}]}",
                   line({trace, A, 'receive', #{k => [{state, 1, 2, 3}]}}, O)),
     ?_assertEqual("<0.1.0> << {a,#state{...}}",
                   line({trace, A, 'receive', {a, {state, 1, 2, {deep}}}}, O#{depth => 4})),
     %% Without definitions, as always.
     ?_assertEqual("<0.1.0> << {state,1,2,3}", line({trace, A, 'receive', {state, 1, 2, 3}})),
     ?_assertEqual("<0.1.0> << {state,1,2,3}",
                   line({trace, A, 'receive', {state, 1, 2, 3}}, #{records => #{}})),
     ?_assertEqual("#state{count = 1,name = 2,items = 3}",
                   lists:flatten(tracekit_format:term({state, 1, 2, 3}, O)))].

refs_test_() ->
    A = p("<0.1.0>"),
    R1 = list_to_ref("#Ref<0.1.2.83994>"),
    R2 = list_to_ref("#Ref<0.1.2.83995>"),
    %% Same last number as R1, then same last two numbers as well.
    R3 = list_to_ref("#Ref<0.5.2.83994>"),
    R4 = list_to_ref("#Ref<0.6.2.83994>"),
    T = lists:foldl(fun tracekit_format:tag_refs/2, tracekit_format:new_ref_table(),
                    [{R1, [R2]}, #{R3 => x}, R1, [R4 | R4]]),
    Tags = tracekit_format:ref_tags(T),
    O = #{refs => Tags},
    [?_assertEqual(#{R1 => "#Ref<..83994>", R2 => "#Ref<..83995>",
                     R3 => "#Ref<..2.83994>",
                     R4 => "#Ref<0.6.2.83994>"}, Tags),
     ?_assertEqual("<0.1.0> ! {[alias|#Ref<..83994>],ok} -> alias #Ref<..83994>",
                   line({trace, A, send, {[alias | R1], ok}, R1}, O)),
     ?_assertEqual("<0.1.0> << {'$gen_call',{<0.1.0>,[alias|#Ref<..83995>]},{get,#{#Ref<..2.83994> => 1}}}",
                   line({trace, A, 'receive', {'$gen_call', {A, [alias | R2]}, {get, #{R3 => 1}}}}, O)),
     %% A reference without a tag prints whole.
     ?_assertEqual("<0.1.0> << #Ref<0.1.2.3>",
                   line({trace, A, 'receive', list_to_ref("#Ref<0.1.2.3>")}, O)),
     %% An atom that looks like a placeholder is left alone (and the
     %% references of that term print whole).
     ?_assertEqual("<0.1.0> << {'$tracekit_ref_1',#Ref<0.1.2.83994>}",
                   line({trace, A, 'receive', {'$tracekit_ref_1', R1}}, O)),
     %% Tags are kept: tagging again changes nothing.
     ?_assertEqual(T, tracekit_format:tag_refs([R1, R2, R3, R4], T)),
     ?_assertError(badarg, tracekit_format:tag_refs(R1, x))].

%% Many references in one term, more than the placeholders: those beyond
%% print whole, and the line is right.
many_refs_test() ->
    Refs = [make_ref() || _ <- lists:seq(1, 40)],
    T = tracekit_format:tag_refs(Refs, tracekit_format:new_ref_table()),
    Line = line({trace, p("<0.1.0>"), 'receive', Refs},
                #{refs => tracekit_format:ref_tags(T), depth => 100, line_length => 100000}),
    Shown = [case I =< 32 of
                 true -> maps:get(R, tracekit_format:ref_tags(T));
                 false -> ref_to_list(R)
             end || {I, R} <- lists:enumerate(Refs)],
    ?assertEqual(lists:flatten(["<0.1.0> << [", lists:join(",", Shown), "]"]), Line).

stacks_test_() ->
    A = p("<0.1.0>"),
    Frames = [{a, b, 1, [{file, "a.erl"}, {line, 3}]}, {c, d, [x, y], []}, {e, f, 0, []}],
    O = #{stacks => 2},
    [?_assertEqual("<0.1.0> m:f(1) <- a:b/1 <- c:d/2 <- ...",
                   line({trace, A, call, {m, f, [1]}, {stack, Frames}}, O)),
     ?_assertEqual("<0.1.0> m:f(1) <- a:b/1 <- c:d/2 <- e:f/0",
                   line({trace, A, call, {m, f, [1]}, {stack, Frames}}, #{stacks => 3})),
     ?_assertEqual("<0.1.0> m:f(1) <- a:b/1",
                   line({trace, A, call, {m, f, [1]}, {stack, [hd(Frames)]}}, O)),
     ?_assertEqual("<0.1.0> m:f(1)", line({trace, A, call, {m, f, [1]}, {stack, []}}, O)),
     ?_assertEqual("<0.1.0> m:f(1) <- t:g/2", line({trace, A, call, {m, f, [1]}, {caller, {t, g, 2}}}, O)),
     ?_assertEqual("<0.1.0> m:f(1) <- (caller unknown)",
                   line({trace, A, call, {m, f, [1]}, {caller, undefined}}, O)),
     %% What is not a stack or a caller is shown as it is.
     ?_assertEqual("<0.1.0> m:f(1) ({stack,[x]})", line({trace, A, call, {m, f, [1]}, {stack, [x]}}, O)),
     ?_assertEqual("<0.1.0> m:f(1) ({stack,[{a,b,[x|y],[]}]})",
                   line({trace, A, call, {m, f, [1]}, {stack, [{a, b, [x | y], []}]}}, O)),
     ?_assertEqual("<0.1.0> m:f(1) ({caller,x})", line({trace, A, call, {m, f, [1]}, {caller, x}}, O)),
     ?_assertEqual("<0.1.0> m:f(1) ({stack,x})", line({trace, A, call, {m, f, [1]}, {stack, x}}, O)),
     %% By default (tracekit_file:format, tracekit-cat), the term.
     ?_assertEqual("<0.1.0> m:f(1) ({caller,{t,g,2}})",
                   line({trace, A, call, {m, f, [1]}, {caller, {t, g, 2}}})),
     ?_assertEqual("<0.1.0> m:f(1) ({caller,{t,g,2}})",
                   line({trace, A, call, {m, f, [1]}, {caller, {t, g, 2}}}, #{stacks => false}))].

colour_test_() ->
    A = p("<0.1.0>"), B = p("<0.2.0>"),
    O = #{colour => true, names => #{B => srv}, stacks => 1},
    C = fun(Code, Text) -> "\e[" ++ Code ++ "m" ++ Text ++ "\e[0m" end,
    [?_assertEqual(C("36", "<0.1.0>") ++ " " ++ C("1", "m:f") ++ "(1)" ++ C("2", " <- t:g/2"),
                   line({trace, A, call, {m, f, [1]}, {caller, {t, g, 2}}}, O)),
     ?_assertEqual(C("36", "<0.2.0> (srv)") ++ " " ++ C("32", "m:f/1 ->") ++ " ok",
                   line({trace, B, return_from, {m, f, 1}, ok}, O)),
     ?_assertEqual(C("36", "<0.1.0>") ++ " " ++ C("31", "m:f/1 raised error:") ++ "badarg",
                   line({trace, A, exception_from, {m, f, 1}, {error, badarg}}, O)),
     ?_assertEqual(C("36", "<0.1.0>") ++ " " ++ C("33", "!") ++ " hi -> " ++ C("36", "<0.2.0> (srv)"),
                   line({trace, A, send, hi, B}, O)),
     ?_assertEqual(C("36", "<0.2.0> (srv)") ++ " " ++ C("35", "<<") ++ " hi",
                   line({trace, B, 'receive', hi}, O)),
     ?_assertEqual("seq_trace 1: " ++ C("36", "<0.1.0>") ++ " " ++ C("33", "!") ++ " x -> "
                   ++ C("36", "<0.2.0> (srv)") ++ " [0,1]",
                   line({seq_trace, 1, {send, {0, 1}, A, B, x}}, O)),
     %% The line length counts what is visible; a cut ends every colour.
     ?_assertEqual(C("36", "<0.1.0>") ++ " " ++ C("33", "!") ++ " [1,2,3,...",
                   line({trace, A, send, lists:seq(1, 100), B}, O#{line_length => 20})),
     ?_assertEqual(C("36", "<0.2.0> (") ++ "...",
                   line({trace, B, 'receive', hi}, O#{line_length => 12})),
     ?_assertEqual("..", line({trace, B, 'receive', hi}, O#{line_length => 2})),
     ?_assertEqual("<0.1.0> ! hi -> <0.2.0>", line({trace, A, send, hi, B}, #{colour => false}))].

%% One line per message when process tracing and seq_trace both saw it.
merge_seq_test_() ->
    A = p("<0.1.0>"), B = p("<0.2.0>"),
    Send = {trace, A, send, {hi, 1}, B},
    Recv = {trace, B, 'receive', {hi, 1}},
    SeqSend = {seq_trace, 7, {send, {1, 2}, A, B, {hi, 1}}},
    SeqRecv = {seq_trace, 7, {'receive', {1, 2}, A, B, {hi, 1}}},
    L = fun(Es) -> [unicode:characters_to_list(X)
                    || {_, X} <- tracekit_format:events(Es, #{merge_seq => true, names => #{B => srv}})]
        end,
    Far = [{trace, A, 'receive', {filler, I}} || I <- lists:seq(1, 20)],
    [?_assertEqual(["<0.1.0> ! {hi,1} -> <0.2.0> (srv) [1,2]",
                    "<0.2.0> (srv) << {hi,1} from <0.1.0> [1,2]"],
                   L([Send, SeqSend, SeqRecv, Recv])),
     %% Either comes first.
     ?_assertEqual(["<0.1.0> ! {hi,1} -> <0.2.0> (srv) [1,2]",
                    "<0.2.0> (srv) << {hi,1} from <0.1.0> [1,2]"],
                   L([SeqSend, Send, Recv, SeqRecv])),
     %% Seen by one of them only: as always.
     ?_assertEqual(["<0.1.0> ! {hi,1} -> <0.2.0> (srv)",
                    "seq_trace 7: <0.2.0> (srv) << {hi,1} from <0.1.0> [1,2]"],
                   L([Send, SeqRecv])),
     %% Another message, another process: not the same happening.
     ?_assertEqual(4, length(L([Send, {seq_trace, 7, {send, {1, 2}, A, B, {hi, 2}}},
                                Recv, {seq_trace, 7, {'receive', {1, 2}, B, A, {hi, 1}}}]))),
     %% Too far apart.
     ?_assertEqual(22, length(L([Send] ++ Far ++ [SeqSend]))),
     %% Two sends of the same message: each with its own serial.
     ?_assertEqual(["<0.1.0> ! {hi,1} -> <0.2.0> (srv) [1,2]",
                    "<0.1.0> ! {hi,1} -> <0.2.0> (srv) [2,3]"],
                   L([Send, Send, SeqSend, {seq_trace, 7, {send, {2, 3}, A, B, {hi, 1}}}])),
     %% With timestamps, and without merge_seq every event has its line.
     ?_test(begin
                [Line] = L([list_to_tuple([trace_ts | tl(tuple_to_list(Send))] ++ [{1, 2, 3}]),
                            erlang:append_element(SeqSend, {1, 2, 4})]),
                ?assertMatch({match, _}, re:run(Line, "^[0-9:]{8}\\.000003 <0.1.0> ! {hi,1} -> "
                                                "<0.2.0> \\(srv\\) \\[1,2\\]$"))
            end),
     ?_assertEqual(4, length(tracekit_format:events([Send, SeqSend, SeqRecv, Recv], #{}))),
     ?_assertEqual([], tracekit_format:events([], #{merge_seq => true}))].

%% events/2 with short_refs tags along the list; without options each
%% line is event/2's.
events_list_test_() ->
    A = p("<0.1.0>"),
    R = list_to_ref("#Ref<0.1.2.3>"),
    Es = [{trace, A, 'receive', R}, {trace, A, send, R, A}, x],
    [?_assertEqual(["<0.1.0> << #Ref<..3>", "<0.1.0> ! #Ref<..3> -> <0.1.0>", "x"],
                   [unicode:characters_to_list(L)
                    || {_, L} <- tracekit_format:events(Es, #{short_refs => true})]),
     ?_assertEqual([{E, line(E)} || E <- Es],
                   [{E, unicode:characters_to_list(L)} || {E, L} <- tracekit_format:events(Es, #{})]),
     %% The events that have a line, with it.
     ?_assertEqual([{trace, A, send, m, A}, {trace, A, 'receive', m}],
                   [E || {E, _} <- tracekit_format:events(
                                     [{trace, A, send, m, A}, {seq_trace, 0, {send, {0, 1}, A, A, m}},
                                      {seq_trace, 0, {'receive', {0, 1}, A, A, m}},
                                      {trace, A, 'receive', m}], #{merge_seq => true})]),
     ?_assertError(badarg, tracekit_format:events(x, #{})),
     ?_assertError(badarg, tracekit_format:events(Es, #{merge_seq => 1}))].

new_bad_options_test_() ->
    E = {trace, p("<0.1.0>"), 'receive', x},
    [?_assertError(badarg, tracekit_format:event(E, Bad))
     || Bad <- [#{records => x}, #{refs => [x]}, #{stacks => 0}, #{stacks => true},
                #{colour => auto}, #{merge_seq => x}, #{short_refs => 1}]].

%% Whatever the term, a line and no crash, with everything on (about 7,000
%% lines: more than EUnit's 5 seconds on a loaded machine, under ASan).
any_term_with_everything_on_test_() ->
    {timeout, 120, fun any_term_with_everything_on/0}.

any_term_with_everything_on() ->
    A = p("<0.1.0>"),
    R = make_ref(),
    Odd = ['...', [a | '...'], {'...', <<"ab">>, 100}, [], 1 bsl 300, <<1:3>>, #{R => '...'},
           A, R, [R | R], fun() -> ok end, [x | y], {}, {state, 1, 2, 3}, {empty},
           {stack, [x]}, {stack, [{a, b, 1, []} | x]}, {caller, {a, b, c}}, {caller, undefined},
           lists:foldl(fun(_, T) -> {state, T, R, [x]} end, x, lists:seq(1, 50))],
    Tags = [call, return_from, exception_from, send, 'receive', spawn, exit, '...'],
    Events = [list_to_tuple([trace, P, T | Rest])
              || P <- [A, '...'], T <- Tags,
                 Rest <- [[]] ++ [[X] || X <- Odd] ++ [[X, Y] || X <- Odd, Y <- Odd]]
        ++ [{seq_trace, 1, {send, {0, 1}, A, A, X}} || X <- Odd] ++ Odd,
    T = tracekit_format:tag_refs(Events, tracekit_format:new_ref_table()),
    O = #{records => ?DEFS, refs => tracekit_format:ref_tags(T), stacks => 3, colour => true},
    Failed = [E || E <- Events,
                   not (try is_list(line(E, O)) catch _:_ -> false end)],
    ?assertEqual([], Failed),
    Lines = tracekit_format:events(Events, O#{merge_seq => true, short_refs => true}),
    ?assert(length(Lines) > 1000),
    ?assert(lists:all(fun({_, L}) -> string:find(L, "\n") =:= nomatch end, Lines)).

%% Large terms are looked into only so far: a line with tags costs about
%% what a plain line costs, whatever the size.
large_terms_with_refs_test_() ->
    R = list_to_ref("#Ref<0.1.2.3>"),
    T = tracekit_format:tag_refs(R, tracekit_format:new_ref_table()),
    O = #{refs => tracekit_format:ref_tags(T)},
    Big = [R | lists:seq(1, 1000000)],
    BigTuple = list_to_tuple(Big),
    [?_assertEqual("<0.1.0> << [#Ref<..3>,1,2,3|...]", line({trace, p("<0.1.0>"), 'receive', Big},
                                                             O#{depth => 5})),
     %% Too large to look into: whole, as without tags.
     ?_assertEqual("<0.1.0> << {#Ref<0.1.2.3>,1,2,3,...}",
                   line({trace, p("<0.1.0>"), 'receive', BigTuple}, O#{depth => 5})),
     ?_test(begin
                {Us, _} = timer:tc(fun() -> tracekit_format:tag_refs({Big, BigTuple}, T) end),
                ?assert(Us < 200000)
            end)].

%% A deeply nested list (a left-nested iolist, say) is looked into for
%% references only as far as the budget, as a long list or a large tuple
%% is: a reference that lies deeper gets no tag (and keeps its whole
%% form where it is printed).
deep_list_with_refs_test_() ->
    R = list_to_ref("#Ref<0.1.2.3>"),
    Deep = lists:foldl(fun(_, A) -> [A] end, [R], lists:seq(1, 1000000)),
    Shallow = lists:foldl(fun(_, A) -> [A] end, [R], lists:seq(1, 100)),
    Tags = fun(T) -> tracekit_format:ref_tags(tracekit_format:tag_refs(T, tracekit_format:new_ref_table())) end,
    Tagged = Tags(R),
    [?_assertEqual(#{}, Tags(Deep)),
     ?_assertEqual(Tagged, Tags(Shallow)),
     ?_assertEqual("<0.1.0> << {#Ref<..3>,[[...]]}",
                   line({trace, p("<0.1.0>"), 'receive', {R, Deep}}, #{refs => Tagged, depth => 4})),
     ?_assertEqual(["<0.1.0> << [[[#Ref<..3>]]]", "<0.1.0> << [[[[...]]]]"],
                   [lists:flatten(L) || {_, L} <- tracekit_format:events(
                                                    [{trace, p("<0.1.0>"), 'receive', [[[R]]]},
                                                     {trace, p("<0.1.0>"), 'receive', Deep}],
                                                    #{short_refs => true, depth => 4})])].

%% Options made by hand that are not what tracekit makes: a record
%% definition that is not a list of as many field names, a reference tag
%% that is not text. The tuple and the reference print as they are.
hand_made_options_test_() ->
    A = p("<0.1.0>"),
    R = list_to_ref("#Ref<0.1.2.3>"),
    [?_assertEqual("<0.1.0> << {a,1}", line({trace, A, 'receive', {a, 1}}, #{records => #{{a, 1} => x}})),
     ?_assertEqual("<0.1.0> << {a,1}", line({trace, A, 'receive', {a, 1}}, #{records => #{{a, 1} => [1]}})),
     ?_assertEqual("<0.1.0> << {a,1}", line({trace, A, 'receive', {a, 1}}, #{records => #{{a, 1} => [x, y]}})),
     ?_assertEqual("<0.1.0> << #a{x = 1}", line({trace, A, 'receive', {a, 1}}, #{records => #{{a, 1} => [x]}})),
     ?_assertEqual("<0.1.0> << #Ref<0.1.2.3>", line({trace, A, 'receive', R}, #{refs => #{R => 123}})),
     ?_assertEqual("<0.1.0> << #Ref<0.1.2.3>", line({trace, A, 'receive', R}, #{refs => #{R => [a]}})),
     ?_assertEqual("<0.1.0> << x", line({trace, A, 'receive', x}, #{refs => #{R => [a]}}))].

%% Input that is not what the functions take: badarg, not a crash
%% inside.
bad_input_is_badarg_test_() ->
    [?_assertError(badarg, tracekit_format:events([{trace, p("<0.1.0>"), 'receive', x} | y], #{})),
     ?_assertError(badarg, tracekit_format:events([x | y], #{merge_seq => true})),
     ?_assertError(badarg, tracekit_format:summary(#{reason => stopped, shown => 1, dropped => 0,
                                                     nodes => x}))].

%% A string or binary of the term that reads like a placeholder of a
%% reference tag keeps its text (and the references print whole).
text_like_a_placeholder_test_() ->
    A = p("<0.1.0>"),
    R = list_to_ref("#Ref<0.1.2.3>"),
    O = #{refs => #{R => "#Ref<..3>"}},
    [?_assertEqual("<0.1.0> << {#Ref<0.1.2.3>,\"'$tracekit_ref_1'\"}",
                   line({trace, A, 'receive', {R, "'$tracekit_ref_1'"}}, O)),
     ?_assertEqual("<0.1.0> << {#Ref<0.1.2.3>,<<\"'$tracekit_ref_1'\">>}",
                   line({trace, A, 'receive', {R, <<"'$tracekit_ref_1'">>}}, O)),
     ?_assertEqual("<0.1.0> << {#Ref<..3>,#Ref<..3>,\"'$tracekit_ref_2'\"}",
                   line({trace, A, 'receive', {R, R, "'$tracekit_ref_2'"}}, O)),
     ?_assertEqual("<0.1.0> << {#Ref<..3>,#Ref<..3>}",
                   line({trace, A, 'receive', {R, R}}, O))].

%% merge_seq over many sends of one message (none paired): about the cost
%% of the lines without it, not growing with the square of their number.
merge_seq_many_same_messages_test_() ->
    {timeout, 120,
     fun() ->
             A = p("<0.1.0>"),
             Es = lists:duplicate(60000, {trace, A, send, tick, A}),
             {Plain, L1} = timer:tc(fun() -> tracekit_format:events(Es, #{}) end),
             {Merged, L2} = timer:tc(fun() -> tracekit_format:events(Es, #{merge_seq => true}) end),
             ?assertEqual(L1, L2),
             ?assert(Merged < 4 * Plain + 500000)
     end}.
