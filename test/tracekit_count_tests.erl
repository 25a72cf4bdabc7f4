-module(tracekit_count_tests).
-include_lib("eunit/include/eunit.hrl").

new_read_reset_test() ->
    {ok, C} = tracekit_count:new(),
    ?assertEqual(#{}, tracekit_count:read(C)),
    ok = tracekit_count:trace(send, C, self(), hi, #{}),
    ok = tracekit_count:trace(send, C, self(), hi, #{}),
    ok = tracekit_count:trace(call, C, self(), {m, f, []}, #{}),
    ?assertEqual(#{send => 2, call => 1}, tracekit_count:read(C)),
    ok = tracekit_count:reset(C),
    ?assertEqual(#{}, tracekit_count:read(C)).

enabled_answers_test() ->
    {ok, C} = tracekit_count:new(),
    ?assertEqual(trace, tracekit_count:enabled(send, C, self())),
    ?assertEqual(trace, tracekit_count:enabled(trace_status, C, self())),
    ok = tracekit_count:close(C),
    ?assertEqual(remove, tracekit_count:enabled(trace_status, C, self())),
    ?assertEqual(discard, tracekit_count:enabled(send, C, self())),
    %% A closed counter counts nothing but can still be read.
    ok = tracekit_count:trace(send, C, self(), hi, #{}),
    ?assertEqual(#{}, tracekit_count:read(C)).

counters_are_independent_test() ->
    {ok, A} = tracekit_count:new(),
    {ok, B} = tracekit_count:new(),
    ok = tracekit_count:trace(spawn, A, self(), x, #{}),
    ?assertEqual(#{spawn => 1}, tracekit_count:read(A)),
    ?assertEqual(#{}, tracekit_count:read(B)).

badarg_test_() ->
    [?_assertError(badarg, tracekit_count:F(X))
     || F <- [read, reset, close], X <- [undefined, 1, make_ref(), "c"]].
