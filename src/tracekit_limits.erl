%% @doc The event limits of a trace: at most N events, and optionally at
%% most N events within a time window. Pure: the caller gives each event's
%% time and acts on the answer.
-module(tracekit_limits).

-export([new/2, event/2, shown/1]).

-export_type([limits/0, reason/0]).

-record(limits, {max :: pos_integer() | infinity,
                 rate :: none | {pos_integer(), pos_integer()},
                 shown = 0 :: non_neg_integer(),
                 window = queue:new() :: queue:queue(integer())}).

-opaque limits() :: #limits{}.
-type reason() :: {max_events, pos_integer()} | {rate, {pos_integer(), pos_integer()}}.

%% @doc Limits of at most `Max' events, and at most `N' events within
%% `Ms' milliseconds for `Rate = {N, Ms}' (or `none'). Anything else
%% raises `badarg'.
-spec new(pos_integer() | infinity, none | {pos_integer(), pos_integer()}) -> limits().
new(Max, Rate) when (Max =:= infinity orelse is_integer(Max) andalso Max > 0),
                    (Rate =:= none orelse
                     is_tuple(Rate) andalso tuple_size(Rate) =:= 2
                     andalso is_integer(element(1, Rate)) andalso element(1, Rate) > 0
                     andalso is_integer(element(2, Rate)) andalso element(2, Rate) > 0) ->
    #limits{max = Max, rate = Rate};
new(Max, Rate) ->
    erlang:error(badarg, [Max, Rate]).

%% @doc Decides about one event that happened at `TimeUs' microseconds
%% (any clock that does not go back): `show' it, show it as the `last' one
%% (a limit is reached with it), or `stop' without showing it (it exceeds
%% the rate).
-spec event(integer(), limits()) ->
          {show, limits()} | {last, reason(), limits()} | {stop, reason(), limits()}.
event(TimeUs, #limits{rate = {N, Ms} = Rate, window = W} = L) when is_integer(TimeUs) ->
    case queue:len(W) >= N andalso TimeUs - queue:get(W) < Ms * 1000 of
        true ->
            {stop, {rate, Rate}, L};
        false ->
            W1 = queue:in(TimeUs, W),
            W2 = case queue:len(W1) > N of
                     true -> queue:drop(W1);
                     false -> W1
                 end,
            count(L#limits{window = W2})
    end;
event(TimeUs, #limits{rate = none} = L) when is_integer(TimeUs) ->
    count(L);
event(TimeUs, L) ->
    erlang:error(badarg, [TimeUs, L]).

count(#limits{max = Max, shown = S} = L) ->
    L1 = L#limits{shown = S + 1},
    case S + 1 =:= Max of
        true -> {last, {max_events, Max}, L1};
        false -> {show, L1}
    end.

%% @doc How many events were shown.
-spec shown(limits()) -> non_neg_integer().
shown(#limits{shown = S}) -> S;
shown(L) -> erlang:error(badarg, [L]).
