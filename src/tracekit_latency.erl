%% @doc A tracer module that measures call latency in C: per function, a
%% histogram of the durations of its calls, from the call to its return or
%% exception, without a message per call.
%%
%% ```
%% 1> {ok, L} = tracekit_latency:new(#{}).
%% 2> S = trace:session_create(lat, {tracekit_latency, L}, []).
%% 3> trace:process(S, all, true, [call, procs]).
%% 4> trace:function(S, {my_server, handle_call, 3}, [{'_', [], [{exception_trace}]}], [local]).
%%    ... later ...
%% 5> tracekit_latency:close(L), tracekit_latency:read(L).
%% #{functions => #{{my_server,handle_call,3} =>
%%                      #{returns => #{count => 1042, sum => 88132211, min => 41200,
%%                                     max => 1984000, buckets => [{960,3}, ...]},
%%                        exceptions => #{count => 0, ...}, unfinished => 0, nested => 0}},
%%   counters => #{calls => 1042, measured => 1042, dropped => 0, ...}, ...}
%% '''
%% (Durations in nanoseconds; {@link tracekit_hist} turns a histogram into
%% percentiles, and {@link tracekit:latency/2} does all of this at the
%% shell.)
%%
%% The traced processes' callbacks only write a 32-byte record (the
%% process, the function, the kind of event, an ordering stamp) into their
%% scheduler's own ring: no term is copied, no lock taken, nothing
%% allocated. A thread of the tracer's own takes the records out in time
%% order, keeps a stack of open calls per process, pairs each return or
%% exception with its call and adds the duration to the function's
%% histogram: memory stays bounded whatever the call rate, and a full ring
%% drops events (before the VM builds them) and counts them.
%%
%% What is measured: the time from the `call' event to the `return_from'
%% or `exception_from' event of the same call, so the function patterns
%% need `{exception_trace}' (which gives both); exceptions go in a
%% histogram of their own. With `recursion => outermost' (the default) a
%% call of a function while the process is already inside that function
%% is not measured (it is part of the outer call, and counted as
%% `nested'); with `each' every level is measured alone. The `exit' of a
%% process (the `procs' flag) ends its open calls as `unfinished'; so does
%% {@link close/1} for the calls still open. A process that moves between
%% schedulers keeps its events in order (the rings are merged by stamp).
%%
%% Histograms: log-linear buckets over 0 .. 2^64-1 ns, exact below 128 ns,
%% and within 0.79 % (2^-7) above, with the exact count, sum, minimum and
%% maximum ({@link layout/0}); two merge exactly by adding their buckets.
-module(tracekit_latency).

-export([new/0, new/1, resume/1, close/1, read/1, stats/1, limits/0, layout/0,
         bucket/1, histogram/1, check_option/2]).

-on_load(init/0).

-nifs([new_nif/6, resume/1, close/1, read/1, stats/1, limits/0, layout/0, bucket/1,
       histogram_nif/1]).

-define(DEFAULTS, #{size => 1 bsl 20, recursion => outermost, max_functions => 10000,
                    max_processes => 100000, max_frames => 1000000, paused => false}).

-opaque tracer() :: reference().
-type options() :: #{size => pos_integer(),
                     recursion => outermost | each,
                     max_functions => pos_integer(),
                     max_processes => pos_integer(),
                     max_frames => pos_integer(),
                     paused => boolean()}.
%% Nanoseconds; `buckets' sorted by index, each holding at least one
%% value (see {@link bucket/1}).
-type histogram() :: #{count := non_neg_integer(), sum := non_neg_integer(),
                       min := non_neg_integer(), max := non_neg_integer(),
                       buckets := [{non_neg_integer(), pos_integer()}]}.
-type function_latency() :: #{returns := histogram(), exceptions := histogram(),
                              unfinished := non_neg_integer(), nested := non_neg_integer()}.
-type counters() :: #{atom() => non_neg_integer() | boolean()}.
-type snapshot() :: #{layout := {tracekit_hist, pos_integer()},
                      hz := pos_integer(),
                      recursion := outermost | each,
                      functions := #{mfa() => function_latency()},
                      counters := counters()}.
-export_type([tracer/0, options/0, histogram/0, function_latency/0, snapshot/0, counters/0]).

-include("tracer_callbacks.hrl").

init() ->
    erlang:load_nif(tracekit_nif:path(?MODULE), 0).

%% @equiv new(#{})
-spec new() -> {ok, tracer()}.
new() ->
    {ok, _} = new(#{}).

%% @doc Creates a latency tracer, its rings and its thread. Options (all
%% optional):
%% <dl>
%% <dt>`size'</dt><dd>bytes of each scheduler thread's ring, a power of
%%   two from 4096 to 1 GiB (default 1 MiB: 21,800 records, some 10 ms of
%%   a scheduler calling traced functions flat out).</dd>
%% <dt>`recursion'</dt><dd>`outermost' (default) or `each' (see
%%   above).</dd>
%% <dt>`max_functions', `max_processes', `max_frames'</dt><dd>the most
%%   functions measured (default 10,000), processes with calls open at
%%   once (100,000) and open calls in all (1,000,000): beyond them calls
%%   are not followed, and counted (`over_functions', ...).</dd>
%% <dt>`paused'</dt><dd>`true': nothing is recorded until {@link
%%   resume/1} (default false).</dd>
%% </dl>
%% A bad option gives `{error, {badopt, Option}}'; {@link check_option/2}
%% says what is wrong with it.
-spec new(options()) -> {ok, tracer()} | {error, {badopt, term()}}.
new(Opts) when is_map(Opts) ->
    case [{K, V} || K := V <- Opts, check_option(K, V) =/= ok] of
        [] ->
            #{size := Size, recursion := Rec, max_functions := F, max_processes := P,
              max_frames := Fr, paused := Paused} = maps:merge(?DEFAULTS, Opts),
            new_nif(Size, Rec, F, P, Fr, Paused);
        [Bad | _] ->
            {error, {badopt, Bad}}
    end;
new(Opts) ->
    {error, {badopt, Opts}}.

%% @doc `ok', or what is wrong with an option of {@link new/1}, in words.
-spec check_option(term(), term()) -> ok | {error, string()}.
check_option(size, S) ->
    #{min_size := Min, max_size := Max, memory := Mem, schedulers := N} = limits(),
    if
        not is_integer(S); S < Min; S > Max; S band (S - 1) =/= 0 ->
            {error, lists:flatten(io_lib:format("a power of two from ~w to ~w", [Min, Max]))};
        S * N > Mem ->
            {error, lists:flatten(io_lib:format("~w rings of ~w bytes would take more than "
                                                "half of the machine's memory", [N, S]))};
        true ->
            ok
    end;
check_option(recursion, R) when R =:= outermost; R =:= each -> ok;
check_option(recursion, _) -> {error, "outermost or each"};
check_option(paused, B) when is_boolean(B) -> ok;
check_option(paused, _) -> {error, "true or false"};
check_option(K, V) when K =:= max_functions; K =:= max_processes; K =:= max_frames ->
    #{K := Max} = limits(),
    case is_integer(V) andalso V >= 1 andalso V =< Max of
        true -> ok;
        false -> {error, lists:flatten(io_lib:format("an integer from 1 to ~w", [Max]))}
    end;
check_option(K, _) ->
    {error, lists:flatten(io_lib:format("unknown option ~0tP; known: size, recursion, "
                                        "max_functions, max_processes, max_frames, paused",
                                        [K, 5]))}.

new_nif(_Size, _Recursion, _MaxFunctions, _MaxProcesses, _MaxFrames, _Paused) ->
    erlang:nif_error(not_loaded).

%% @doc Starts recording, for a tracer made with `paused => true'.
-spec resume(tracer()) -> ok.
resume(_Tracer) ->
    erlang:nif_error(not_loaded).

%% @doc Stops recording and returns once everything recorded is paired:
%% the calls still open are then `unfinished'. The callbacks remove the
%% tracer from each tracee the next time the VM asks them. {@link read/1}
%% still gives the histograms.
-spec close(tracer()) -> ok.
close(_Tracer) ->
    erlang:nif_error(not_loaded).

%% @doc The histograms of every function measured so far (cumulative, in
%% nanoseconds), and the counters of {@link stats/1}.
-spec read(tracer()) -> snapshot().
read(_Tracer) ->
    erlang:nif_error(not_loaded).

%% @doc The counters: `calls', `returns', `exceptions', `exits' (events
%% taken), `measured' (durations in the histograms), `nested' (calls
%% inside a call of the same function, not measured under `outermost'),
%% `unmatched' (returns of calls not seen: made before tracing, or lost),
%% `unfinished', `lost' (calls open when events were dropped: their end
%% cannot be known), `blind' (events not followed while events were being
%% dropped), `blind_periods', `over_functions', `over_processes',
%% `over_frames' (calls not followed: the bounds), `dropped' (events
%% refused by a full ring), `filtered' (events of other kinds, or while
%% paused), `ignored' (callback calls whose terms are not those of a
%% traced call), `unplaced' (events of a thread without a ring of its
%% own), `written' and `taken' (records), `processes' and `frames' (calls
%% open now), and the settings.
-spec stats(tracer()) -> counters().
stats(_Tracer) ->
    erlang:nif_error(not_loaded).

%% @doc The limits of the options, from the library that enforces them.
-spec limits() -> #{atom() => pos_integer()}.
limits() ->
    erlang:nif_error(not_loaded).

%% @doc The histograms' layout: its version (histograms of different
%% versions never merge), the number of buckets, the relative error of a
%% bucket's value, and below which value buckets are exact.
-spec layout() -> #{version := {tracekit_hist, pos_integer()}, buckets := pos_integer(),
                    error_bound := float(), exact_below := pos_integer()}.
layout() ->
    erlang:nif_error(not_loaded).

%% @doc The values bucket `Index' holds, `{Low, High}' (inclusive), and
%% the value it stands for (its midpoint). Raises `badarg' for an index
%% out of the layout.
-spec bucket(non_neg_integer()) -> {non_neg_integer(), non_neg_integer(), non_neg_integer()}.
bucket(_Index) ->
    erlang:nif_error(not_loaded).

%% @doc The histogram of a list of values (non-negative integers below
%% 2^64), as {@link read/1} gives them: for tests and for histograms of
%% durations measured elsewhere.
-spec histogram([non_neg_integer()]) -> {ok, histogram()} | {error, {bad_sample, term(), string()}}.
histogram(Values) when is_list(Values) ->
    try length(Values) of
        N when N > 10000000 ->
            {error, {bad_sample, N, "at most 10,000,000 values at a time"}};
        _ ->
            case [V || V <- Values, not (is_integer(V) andalso V >= 0 andalso V < 1 bsl 64)] of
                [] -> {ok, histogram_nif(Values)};
                [Bad | _] -> {error, {bad_sample, Bad, "a value is an integer from 0 to 2^64-1"}}
            end
    catch
        error:badarg -> {error, {bad_sample, Values, "a proper list of values"}}
    end;
histogram(Values) ->
    {error, {bad_sample, Values, "a list of values"}}.

histogram_nif(_Values) ->
    erlang:nif_error(not_loaded).
