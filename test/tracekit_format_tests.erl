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
