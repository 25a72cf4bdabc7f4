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

%% tk_limit, the C limits a trace file's writer applies to the records it
%% takes, decides as tracekit_limits does: the same answers for 2,000
%% random limits and event times (bursts, ties, gaps of exactly the span,
%% times out of order by a little, as records of several threads can be), `over' for every event
%% after a limit.
c_limits_agree_test() ->
    rand:seed(exsss, {7, 11, 13}),
    lists:foreach(fun(_) -> c_limits_agree(rand:uniform(1000)) end, lists:seq(1, 2000)).

c_limits_agree(Len) ->
    Max = case rand:uniform(3) of 1 -> infinity; _ -> rand:uniform(Len + 5) end,
    Rate = case rand:uniform(3) of
               1 -> none;
               _ -> {rand:uniform(20), rand:uniform(50)}
           end,
    Times = times(Len, 1000000, []),
    Erlang = erlang_decisions(tracekit_limits:new(Max, Rate), Times),
    {CMax, CN, CSpan} = {case Max of infinity -> 0; _ -> Max end,
                         case Rate of none -> 0; {N, _} -> N end,
                         case Rate of none -> 0; {_, Ms} -> Ms * 1000 end},
    ?assertEqual({Max, Rate, Times, Erlang},
                 {Max, Rate, Times, tracekit_model:limit_run(CMax, CN, CSpan, Times)}).

times(0, _, Acc) ->
    lists:reverse(Acc);
times(N, T, Acc) ->
    Step = case rand:uniform(10) of
               1 -> 0;
               2 -> -rand:uniform(50);   % a little back
               3 -> rand:uniform(100000);
               4 -> 1000 * rand:uniform(5);  % on the grid of whole ms: ties
               5 -> 1000 * rand:uniform(5);  % with the span are frequent
               _ -> rand:uniform(3000)
           end,
    T1 = max(0, T + Step),
    times(N - 1, T1, [T1 | Acc]).

erlang_decisions(L, Times) ->
    {Ds, _} = lists:mapfoldl(fun(_, closed) -> {over, closed};
                                (T, L0) ->
                                     case tracekit_limits:event(T, L0) of
                                         {show, L1} -> {show, L1};
                                         {last, _, _} -> {last, closed};
                                         {stop, _, _} -> {stop, closed}
                                     end
                             end, L, Times),
    Ds.
