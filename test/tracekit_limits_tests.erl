-module(tracekit_limits_tests).

-include_lib("eunit/include/eunit.hrl").

%% Feeds events at the given times (microseconds); returns the answers.
run(L0, Times) ->
    {Answers, _} = lists:mapfoldl(fun(T, L) ->
                                          case tracekit_limits:event(T, L) of
                                              {show, L1} -> {show, L1};
                                              {last, R, L1} -> {{last, R}, L1};
                                              {stop, R, L1} -> {{stop, R}, L1}
                                          end
                                  end, L0, Times),
    Answers.

max_events_test() ->
    ?assertEqual([show, show, {last, {max_events, 3}}],
                 run(tracekit_limits:new(3, none), [1, 2, 3])),
    ?assertEqual([{last, {max_events, 1}}], run(tracekit_limits:new(1, none), [1])).

infinity_test() ->
    L = lists:foldl(fun(T, L) -> {show, L1} = tracekit_limits:event(T, L), L1 end,
                    tracekit_limits:new(infinity, none), lists:seq(1, 10000)),
    ?assertEqual(10000, tracekit_limits:shown(L)).

%% {3, 10}: a fourth event within 10 ms of the first of the last three
%% stops the trace (and is not shown); spaced out, they all pass.
rate_test() ->
    R = {3, 10},
    ?assertEqual([show, show, show, {stop, {rate, R}}],
                 run(tracekit_limits:new(100, R), [0, 1000, 2000, 9999])),
    ?assertEqual([show, show, show, show, show],
                 run(tracekit_limits:new(100, R), [0, 1000, 2000, 10000, 11000])),
    ?assertEqual([show, show, show, show, show, {stop, {rate, R}}],
                 run(tracekit_limits:new(100, R), [0, 5000, 10000, 15000, 16000, 17000])).

rate_and_max_test() ->
    ?assertEqual([show, {last, {max_events, 2}}],
                 run(tracekit_limits:new(2, {5, 1}), [0, 0])).

shown_test() ->
    {stop, _, L} = tracekit_limits:event(1, element(2, tracekit_limits:event(0, tracekit_limits:new(10, {1, 1})))),
    ?assertEqual(1, tracekit_limits:shown(L)).

%% Limits that are not limits are refused when made, not when the first
%% event comes (where a limit of 0 would never be reached).
bad_limits_test_() ->
    L = tracekit_limits:new(3, none),
    [?_assertError(badarg, tracekit_limits:new(0, none)),
     ?_assertError(badarg, tracekit_limits:new(-1, none)),
     ?_assertError(badarg, tracekit_limits:new(x, none)),
     ?_assertError(badarg, tracekit_limits:new(3, {0, 10})),
     ?_assertError(badarg, tracekit_limits:new(3, {1, 0})),
     ?_assertError(badarg, tracekit_limits:new(3, {1, 2, 3})),
     ?_assertError(badarg, tracekit_limits:new(3, x)),
     ?_assertError(badarg, tracekit_limits:event(1.5, L)),
     ?_assertError(badarg, tracekit_limits:event(1, x)),
     ?_assertError(badarg, tracekit_limits:shown(x)),
     ?_assertMatch({show, _}, tracekit_limits:event(1, tracekit_limits:new(infinity, {1, 1})))].
