%% @doc A tracer module that records trace events into lock-free ring
%% buffers, one per scheduler thread, instead of sending a message per event.
%%
%% ```
%% 1> {ok, R} = tracekit_ring:new(#{size => 1 bsl 20}).
%% 2> S = trace:session_create(demo, {tracekit_ring, R}, []).
%% 3> trace:process(S, whereis(my_server), true, [send, 'receive', timestamp]).
%% 4> tracekit_ring:drain(R).
%% [{trace_ts,<0.90.0>,'receive',{'$gen_call',...},{1732,281234,123456}}, ...]
%% '''
%%
%% Why a ring: a process tracer gets one message per event. Under load its
%% mailbox grows without bound, and every event costs a message send. A
%% ring costs a few memory writes per event in the thread where the event
%% happens, holds a bounded number of bytes, and counts what it could not
%% keep. The events come back from {@link drain/1} as exactly the terms a
%% process tracer would have received for the same trace flags.
%%
%% The ring is the tracer state wherever OTP accepts a tracer module:
%% `trace:session_create(Name, {tracekit_ring, Ring}, [])',
%% `erlang:trace(Pids, true, [{tracer, tracekit_ring, Ring} | Flags])' or
%% `seq_trace:set_system_tracer({tracekit_ring, Ring})'.
%%
%% When a ring is full, policy `drop' (the default) keeps the oldest events
%% and refuses new ones, before the VM even builds them; policy `overwrite'
%% keeps the newest (a flight recorder). Either way {@link stats/1} counts
%% every event that was not kept.
-module(tracekit_ring).

-export([new/0, new/1, set/2, drain/1, drain/2, stats/1, close/1, alive/0,
         limits/0, tags/0, check_option/2, check_config/1]).

-on_load(init/0).

-nifs([new_nif/5, set_nif/4, close/1, stats/1, drain_chunk/2, drain_all/1, alive/0,
       limits/0, tags/0]).

-define(DEFAULT_SIZE, 1 bsl 20).

-opaque ring() :: reference().
-type tag() :: atom().
-type option() :: {size, pos_integer()}
                | {policy, drop | overwrite}
                | {payload, full | none | {max_bytes, pos_integer()}}
                | {tags, [tag()]}.
-type options() :: #{size => pos_integer(),
                     policy => drop | overwrite,
                     payload => full | none | {max_bytes, pos_integer()},
                     tags => [tag()]}
                 | [option()].
-type event() :: tuple().
-type stats() :: #{written := non_neg_integer(),
                   dropped := non_neg_integer(),
                   overwritten := non_neg_integer(),
                   bytes := non_neg_integer(),
                   producers := non_neg_integer(),
                   filtered := non_neg_integer(),
                   truncated := non_neg_integer(),
                   drained := non_neg_integer(),
                   undecodable := non_neg_integer(),
                   buffered := non_neg_integer(),
                   size := pos_integer(),
                   policy := drop | overwrite,
                   closed := boolean(),
                   paused := boolean(),
                   sample := pos_integer(),
                   tags := all | [tag()]}.
-type config() :: #{paused => boolean(),
                    tags => all | [tag()],
                    sample => pos_integer()}.
-type limits() :: #{min_size := pos_integer(),
                    max_size := pos_integer(),
                    memory := pos_integer(),
                    schedulers := pos_integer(),
                    max_bytes := pos_integer(),
                    drain_chunk := pos_integer()}.
-export_type([ring/0, options/0, config/0, event/0, stats/0, limits/0]).

-include("tracer_callbacks.hrl").

init() ->
    erlang:load_nif(tracekit_nif:path(?MODULE), 0).

%% @equiv new(#{})
-spec new() -> {ok, ring()}.
new() ->
    {ok, _} = new(#{}).

%% @doc Creates a ring. Every option is optional:
%% <dl>
%% <dt>`size'</dt><dd>bytes of each producer thread's ring, a power of two
%%   from 4096 to 1 GiB (default 1 MiB). Memory use is at most `size' times
%%   the number of threads that produce events (the schedulers that run
%%   traced processes). `new/1' allocates and touches one ring per
%%   scheduler at once (so that no event pays for a page fault), so it
%%   refuses a size whose rings for all schedulers would take more than
%%   half of the machine's memory (see {@link limits/0}).</dd>
%% <dt>`policy'</dt><dd>`drop' (default) keeps the oldest events when full
%%   and refuses new ones; `overwrite' keeps the newest.</dd>
%% <dt>`payload'</dt><dd>how much of messages, arguments and return values
%%   to keep: `full' (default: every term whole, as long as the event fits
%%   in a quarter of `size'; beyond that it is cut with the marker `...' and
%%   counted as `truncated' by {@link stats/1}), `none' (replaced by the
%%   atom `...'; call arguments by their count), or `{max_bytes, N}' (about
%%   N bytes of each; what does not fit becomes `...', lists end in `...',
%%   binaries become `{..., Prefix, Size}', funs `{..., fun, Name}' (their
%%   environment left out) and integers larger than N bytes `...').
%%   Whatever the mode, terms nested deeper than 200 levels are cut with
%%   the marker.</dd>
%% <dt>`tags'</dt><dd>the event tags to record (for example `[call,
%%   return_from]'; {@link tags/0} lists them); others are discarded before
%%   the VM builds them. Default: all.</dd>
%% </dl>
%% A bad or unknown option gives `{error, {badopt, Option}}';
%% {@link check_option/2} says what is wrong with it.
-spec new(options()) -> {ok, ring()} | {error, {badopt, term()}}.
new(Opts) when is_map(Opts) ->
    new(maps:to_list(Opts));
new(Opts) when is_list(Opts) ->
    Defaults = #{size => ?DEFAULT_SIZE, policy => drop, payload => full,
                 tags => all},
    case check_opts(Opts, Defaults) of
        {ok, #{size := Size, policy := Policy, payload := Payload, tags := Tags}} ->
            {Mode, Max} = case Payload of
                              {max_bytes, N} -> {max_bytes, N};
                              Other -> {Other, 0}
                          end,
            new_nif(Size, Policy, Mode, Max, case Tags of all -> true; L -> L end);
        {error, _} = E ->
            E
    end;
new(Opts) ->
    {error, {badopt, Opts}}.

check_opts([], Acc) ->
    {ok, Acc};
check_opts([{K, V} = O | T], Acc) when is_map_key(K, Acc) ->
    case check_option(K, V) of
        ok when K =:= tags -> check_opts(T, Acc#{K := lists:usort(V)});
        ok -> check_opts(T, Acc#{K := V});
        {error, _} -> {error, {badopt, O}}
    end;
check_opts([O | _], _) ->
    {error, {badopt, O}};
check_opts(Improper, _) ->
    {error, {badopt, Improper}}.

%% @doc Whether `Value' is a good value for the option `Key' of {@link
%% new/1} (`size', `policy', `payload' or `tags'), and if not, why, in
%% words for the person who chose it.
-spec check_option(atom(), term()) -> ok | {error, string()}.
check_option(size, S) ->
    #{min_size := Min, max_size := Max, memory := Mem, schedulers := N} = limits(),
    if
        not is_integer(S) orelse S < Min orelse S > Max orelse S band (S - 1) =/= 0 ->
            fmt("size is a power of two from ~w to ~w bytes", [Min, Max]);
        S * N > Mem ->
            fmt("~w bytes for each of the ~w schedulers is more than half of this "
                "machine's memory (~w MiB in all); choose a smaller size",
                [S, N, 2 * Mem bsr 20]);
        true ->
            ok
    end;
check_option(policy, P) when P =:= drop; P =:= overwrite ->
    ok;
check_option(policy, _) ->
    {error, "policy is drop or overwrite"};
check_option(payload, P) when P =:= full; P =:= none ->
    ok;
check_option(payload, {max_bytes, N}) when is_integer(N), N > 0 ->
    #{max_bytes := Max} = limits(),
    case N =< Max of
        true -> ok;
        false -> fmt("max_bytes is at most ~w", [Max])
    end;
check_option(payload, _) ->
    {error, "payload is full, none or {max_bytes, N}"};
check_option(tags, Tags) ->
    case tag_list_ok(Tags) of
        true -> ok;
        false -> fmt("tags is a non-empty list of trace tags, out of ~w", [tags()])
    end;
check_option(Key, _) ->
    fmt("unknown option ~tw; known: size, policy, payload, tags", [Key]).

fmt(Format, Args) ->
    {error, lists:flatten(io_lib:format(Format, Args))}.

%% A proper, non-empty list of trace tags.
tag_list_ok(L) when is_list(L), L =/= [] ->
    Known = tags(),
    try lists:all(fun(Tag) -> lists:member(Tag, Known) end, L)
    catch error:_ -> false % an improper list
    end;
tag_list_ok(_) ->
    false.

new_nif(_Size, _Policy, _Payload, _MaxBytes, _Tags) ->
    erlang:nif_error(not_loaded).

%% @doc Changes what the ring records, while tracing runs:
%% <dl>
%% <dt>`paused'</dt><dd>`true' discards every event (the VM does not even
%%   build them) until `false'.</dd>
%% <dt>`tags'</dt><dd>the event tags to record, or `all'.</dd>
%% <dt>`sample'</dt><dd>`N' keeps every Nth event of each scheduler thread
%%   (1 keeps all): a way to watch a hot path at a cost the node can
%%   afford.</dd>
%% </dl>
%% Keys left out keep their value. When `set/2' returns the change holds
%% for every thread: no event refused by the new settings is recorded any
%% more, on any scheduler. (The callbacks read the settings without locks;
%% the call waits until none of them can still be using the old ones.)
%% Events refused this way are counted as `filtered' by {@link stats/1}.
-spec set(ring(), config()) -> ok | {error, {badopt, term()}}.
set(Ring, Config) ->
    case check_config(Config) of
        {ok, {Paused, Tags, Sample}} -> set_nif(Ring, Paused, Tags, Sample);
        {error, _} = E -> E
    end.

%% @doc Checks the settings of {@link set/2} (tracekit_file takes the
%% same): `{ok, {Paused, Tags, Sample}}', each `undefined' when left out
%% (Tags `true' for `all'), or `{error, {badopt, Option}}'.
-spec check_config(config()) ->
          {ok, {boolean() | undefined, true | [tag()] | undefined,
                pos_integer() | undefined}} | {error, {badopt, term()}}.
check_config(Config) when is_map(Config) ->
    check_config(maps:to_list(Config), {undefined, undefined, undefined});
check_config(Config) ->
    {error, {badopt, Config}}.

check_config([], Acc) ->
    {ok, Acc};
check_config([{paused, P} | T], {_, Tags, S}) when is_boolean(P) ->
    check_config(T, {P, Tags, S});
check_config([{tags, all} | T], {P, _, S}) ->
    check_config(T, {P, true, S});
check_config([{tags, Tags} = O | T], {P, _, S}) ->
    case tag_list_ok(Tags) of
        true -> check_config(T, {P, lists:usort(Tags), S});
        false -> {error, {badopt, O}}
    end;
check_config([{sample, N} | T], {P, Tags, _}) when is_integer(N), N >= 1, N < 1 bsl 32 ->
    check_config(T, {P, Tags, N});
check_config([O | _], _) ->
    {error, {badopt, O}}.

set_nif(_Ring, _Paused, _Tags, _Sample) ->
    erlang:nif_error(not_loaded).

%% @doc Removes and returns every event recorded so far (as many as were
%% waiting when the call began: producers that go on recording cannot keep
%% it from returning), oldest first.
%% Events of one traced process come in the order they happened; events of
%% different processes are merged by time. Several processes may drain one
%% ring at once: each event goes to exactly one of them.
-spec drain(ring()) -> [event()].
drain(Ring) ->
    drain_all(Ring).

%% @doc Like {@link drain/1}, but returns at most `Max' events; the rest
%% stay for the next call.
-spec drain(ring(), pos_integer()) -> [event()].
drain(Ring, Max) when is_integer(Max), Max > 0 ->
    drain_loop(Ring, Max, []);
drain(_Ring, Max) ->
    erlang:error(badarg, [_Ring, Max]).

%% Each drain_chunk/2 hands out at most a chunk (limits/0); the loop ends
%% when it hands out nothing or the count is reached.
drain_loop(Ring, Left, Acc) ->
    case drain_chunk(Ring, Left) of
        [] ->
            lists:append(lists:reverse(Acc));
        Chunk ->
            case Left - length(Chunk) of
                0 -> lists:append(lists:reverse([Chunk | Acc]));
                Left1 -> drain_loop(Ring, Left1, [Chunk | Acc])
            end
    end.

drain_all(_Ring) ->
    erlang:nif_error(not_loaded).

drain_chunk(_Ring, _Max) ->
    erlang:nif_error(not_loaded).

%% @doc Counters of the ring. `written' events were recorded and
%% `dropped' were offered but not recorded (the ring was full, the event
%% came from a thread without a ring of its own, or its tag was not a
%% trace tag): their sum is every event the VM offered. `overwritten'
%% recorded events gave way to newer ones (policy `overwrite');
%% `filtered' were refused by the `tags', `paused' or `sample' settings;
%% `truncated' were recorded with a part cut for want of room (see the
%% `payload' option of {@link new/1}); `drained' were handed out by
%% drain; `undecodable' could not be turned back into terms (a bug,
%% counted rather than hidden); `buffered' wait to be drained;
%% `bytes' were written into the rings in all; `producers' is the number
%% of threads that have a ring. `paused', `sample' and `tags' are the
%% current settings (see {@link set/2}).
-spec stats(ring()) -> stats().
stats(_Ring) ->
    erlang:nif_error(not_loaded).

%% @doc Stops recording. The VM removes the tracer from each traced
%% process the next time it asks the tracer (at the latest when the process
%% is scheduled in); events arriving meanwhile are discarded. Events
%% already recorded can still be drained.
-spec close(ring()) -> ok.
close(_Ring) ->
    erlang:nif_error(not_loaded).

%% @doc What rings accept, from the library that enforces it:
%% `min_size' and `max_size' (bytes per producer ring), `memory' (what the
%% rings made at creation, `size' times `schedulers', may take in all:
%% half of the machine's memory), `schedulers' (rings made at creation),
%% `max_bytes' (the largest `{max_bytes, N}') and `drain_chunk' (events
%% handed out per call inside {@link drain/2}).
-spec limits() -> limits().
limits() ->
    erlang:nif_error(not_loaded).

%% @doc Every tag a ring records: the tags the VM hands to a tracer
%% module.
-spec tags() -> [tag()].
tags() ->
    erlang:nif_error(not_loaded).

%% @doc The number of rings in this node whose memory is not freed yet. A
%% ring is freed when nothing refers to it any more: neither a process
%% (its handle) nor the VM (a tracer or seq tracer using it). Useful to
%% check that tracing cleaned up after itself.
-spec alive() -> non_neg_integer().
alive() ->
    erlang:nif_error(not_loaded).

