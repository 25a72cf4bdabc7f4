%% @doc Arithmetic on the latency histograms of {@link tracekit_latency}:
%% exact merge (of several nodes' histograms, or several reads), and
%% percentiles.
%%
%% A histogram is a map `#{count, sum, min, max, buckets}' in nanoseconds,
%% `buckets' a list of `{Index, Count}' sorted by index. The bucket rule
%% (which values an index holds) has one home, the C library
%% ({@link tracekit_latency:bucket/1}); this module only counts.
%%
%% Percentiles are by nearest rank: the P-th percentile of N values is the
%% value of rank max(1, ceil(P N / 100)) in increasing order. The bucket
%% that holds that rank is known exactly, and the value a bucket stands
%% for is within 0.79 % of every value in it (exact below 128 ns), so a
%% percentile is within 0.79 % of the exact one; it is clamped to the
%% exact minimum and maximum, so the 0th and 100th are exact.
-module(tracekit_hist).

-export([empty/0, merge/2, merge/1, percentile/2, summary/1, merge_latency/2,
         check/1]).

-export_type([hist/0, summary/0]).

-type hist() :: tracekit_latency:histogram().
%% Microseconds (floats), counts (integers).
-type summary() :: #{count := non_neg_integer(), p50 := float(), p90 := float(),
                     p99 := float(), max := float(), min := float(),
                     mean := float(), total := float(), exceptions := non_neg_integer(),
                     exception_total := float(), exception_max := float(),
                     unfinished := non_neg_integer(), nested := non_neg_integer()}.

%% @doc The histogram of no values.
-spec empty() -> hist().
empty() ->
    #{count => 0, sum => 0, min => 0, max => 0, buckets => []}.

%% @doc The histogram of the values of both: exact.
-spec merge(hist(), hist()) -> hist().
merge(#{count := 0}, B) ->
    B;
merge(A, #{count := 0}) ->
    A;
merge(#{count := CA, sum := SA, min := MinA, max := MaxA, buckets := BA},
      #{count := CB, sum := SB, min := MinB, max := MaxB, buckets := BB}) ->
    #{count => CA + CB, sum => SA + SB, min => min(MinA, MinB), max => max(MaxA, MaxB),
      buckets => add(BA, BB)}.

%% @doc The merge of a list of histograms.
-spec merge([hist()]) -> hist().
merge(Hs) ->
    lists:foldl(fun(H, Acc) -> merge(Acc, H) end, empty(), Hs).

add([{I, A} | TA], [{I, B} | TB]) -> [{I, A + B} | add(TA, TB)];
add([{IA, _} = X | TA], [{IB, _} | _] = LB) when IA < IB -> [X | add(TA, LB)];
add(LA, [Y | TB]) when LA =/= [] -> [Y | add(LA, TB)];
add([], LB) -> LB;
add(LA, []) -> LA.

%% @doc The `P'-th percentile (0 to 100) in nanoseconds, by nearest rank;
%% `undefined' for an empty histogram.
-spec percentile(hist(), number()) -> non_neg_integer() | undefined.
percentile(#{count := 0}, _P) ->
    undefined;
percentile(#{count := N, min := Min, max := Max, buckets := B}, P)
  when is_number(P), P >= 0, P =< 100 ->
    Index = at_rank(B, rank(N, P)),
    {_, _, Value} = tracekit_latency:bucket(Index),
    max(Min, min(Max, Value)).

%% max(1, ceil(P N / 100)), with P N / 100 taken as the integer it is
%% within a float's rounding (so that the 7th percentile of 100 values is
%% rank 7, although 0.07 * 100 is 7.000000000000001).
rank(N, P) when is_integer(P) ->
    max(1, (P * N + 99) div 100);
rank(N, P) ->
    R = P * N / 100,
    Near = round(R),
    max(1, case abs(R - Near) =< 1.0e-9 * max(1, R) of
               true -> Near;
               false -> ceil(R)
           end).

at_rank([{I, C} | _], Rank) when Rank =< C -> I;
at_rank([{_, C} | T], Rank) -> at_rank(T, Rank - C).

%% @doc What the shell shows of a function's latency
%% ({@link tracekit_latency:function_latency()}): the count, percentiles,
%% maximum, minimum, mean and total of the calls that returned, and the
%% count, total and maximum of those that raised, in microseconds.
-spec summary(tracekit_latency:function_latency()) -> summary().
summary(#{returns := R, exceptions := E} = F) ->
    Us = fun(undefined) -> 0.0; (Ns) -> Ns / 1000 end,
    #{count => maps:get(count, R),
      p50 => Us(percentile(R, 50)), p90 => Us(percentile(R, 90)),
      p99 => Us(percentile(R, 99)),
      max => Us(maps:get(max, R)), min => Us(maps:get(min, R)),
      mean => case R of
                  #{count := 0} -> 0.0;
                  #{count := C, sum := S} -> S / C / 1000
              end,
      total => Us(maps:get(sum, R)),
      exceptions => maps:get(count, E),
      exception_total => Us(maps:get(sum, E)), exception_max => Us(maps:get(max, E)),
      unfinished => maps:get(unfinished, F, 0), nested => maps:get(nested, F, 0)}.

%% @doc Two functions' latencies added up (of two nodes, say): exact.
-spec merge_latency(tracekit_latency:function_latency(), tracekit_latency:function_latency()) ->
          tracekit_latency:function_latency().
merge_latency(A, B) ->
    #{returns => merge(maps:get(returns, A), maps:get(returns, B)),
      exceptions => merge(maps:get(exceptions, A), maps:get(exceptions, B)),
      unfinished => maps:get(unfinished, A, 0) + maps:get(unfinished, B, 0),
      nested => maps:get(nested, A, 0) + maps:get(nested, B, 0)}.

%% @doc `ok' when a term is a well-formed histogram (as another node may
%% send one): its numbers within what the library counts (count, minimum
%% and maximum below 2^64, sum below 2^128, so that every figure of
%% {@link summary/1} is a float), buckets sorted, in the layout, their
%% counts adding up.
-spec check(term()) -> ok | {error, string()}.
check(#{count := N, sum := S, min := Min, max := Max})
  when is_integer(N), is_integer(S), is_integer(Min), is_integer(Max),
       (N >= 1 bsl 64 orelse S >= 1 bsl 128 orelse Max >= 1 bsl 64) ->
    {error, "count, min or max not below 2^64, or sum not below 2^128"};
check(#{count := N, sum := S, min := Min, max := Max, buckets := B})
  when is_integer(N), N >= 0, is_integer(S), S >= 0, is_integer(Min), Min >= 0,
       is_integer(Max), Max >= Min, is_list(B) ->
    #{buckets := Size} = tracekit_latency:layout(),
    case buckets_ok(B, -1, Size, 0) of
        N -> ok;
        false -> {error, "buckets not sorted, or out of the layout"};
        _ -> {error, "the buckets' counts do not add up to count"}
    end;
check(_) ->
    {error, "not a histogram map"}.

buckets_ok([], _Last, _Size, Sum) -> Sum;
buckets_ok([{I, C} | T], Last, Size, Sum) when is_integer(I), I > Last, I < Size,
                                                is_integer(C), C > 0 ->
    buckets_ok(T, I, Size, Sum + C);
buckets_ok(_, _, _, _) -> false.
