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

-export([new/0, new/1, set/2, drain/1, drain/2, stats/1, close/1, alive/0]).
%% erl_tracer callbacks, called by the VM.
-export([enabled/3, trace/5,
         enabled_send/3, trace_send/5,
         enabled_receive/3, trace_receive/5,
         enabled_call/3, trace_call/5,
         enabled_procs/3, trace_procs/5,
         enabled_ports/3, trace_ports/5,
         enabled_running_procs/3, trace_running_procs/5,
         enabled_running_ports/3, trace_running_ports/5,
         enabled_garbage_collection/3, trace_garbage_collection/5]).

-on_load(init/0).

-nifs([new_nif/5, set_nif/4, close/1, stats/1, drain_chunk/2, drain_all/1, alive/0,
       enabled/3, trace/5, enabled_send/3, trace_send/5,
       enabled_receive/3, trace_receive/5, enabled_call/3, trace_call/5,
       enabled_procs/3, trace_procs/5, enabled_ports/3, trace_ports/5,
       enabled_running_procs/3, trace_running_procs/5,
       enabled_running_ports/3, trace_running_ports/5,
       enabled_garbage_collection/3, trace_garbage_collection/5]).

-define(DEFAULT_SIZE, 1 bsl 20).
-define(MIN_SIZE, 4096).
-define(MAX_SIZE, 1 bsl 30).
-define(CHUNK, 4000).

-define(TAGS, [send, send_to_non_existing_process, 'receive', call,
               return_from, exception_from, return_to, spawn, spawned, exit,
               link, unlink, getting_linked, getting_unlinked, register,
               unregister, in, out, in_exiting, out_exiting, out_exited,
               gc_major_start, gc_major_end, gc_minor_start, gc_minor_end,
               open, closed, seq_trace]).

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
                   drained := non_neg_integer(),
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
-export_type([ring/0, options/0, config/0, event/0, stats/0]).

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
%%   traced processes).</dd>
%% <dt>`policy'</dt><dd>`drop' (default) keeps the oldest events when full
%%   and refuses new ones; `overwrite' keeps the newest.</dd>
%% <dt>`payload'</dt><dd>how much of messages, arguments and return values
%%   to keep: `full' (default; a term larger than 64 KiB is cut), `none'
%%   (replaced by the atom `...'; call arguments by their count), or
%%   `{max_bytes, N}' (about N bytes of each; what does not fit becomes
%%   `...', lists end in `...', binaries become `{..., Prefix, Size}').</dd>
%% <dt>`tags'</dt><dd>the event tags to record (for example `[call,
%%   return_from]'); others are discarded before the VM builds them.
%%   Default: all.</dd>
%% </dl>
%% A bad or unknown option gives `{error, {badopt, Option}}'.
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
check_opts([{size, S} = O | T], Acc) ->
    case is_integer(S) andalso S >= ?MIN_SIZE andalso S =< ?MAX_SIZE
        andalso S band (S - 1) =:= 0 of
        true -> check_opts(T, Acc#{size := S});
        false -> {error, {badopt, O}}
    end;
check_opts([{policy, P} | T], Acc) when P =:= drop; P =:= overwrite ->
    check_opts(T, Acc#{policy := P});
check_opts([{payload, P} | T], Acc) when P =:= full; P =:= none ->
    check_opts(T, Acc#{payload := P});
check_opts([{payload, {max_bytes, N}} | T], Acc) ->
    case is_integer(N) andalso N > 0 of
        true -> check_opts(T, Acc#{payload := {max_bytes, N}});
        false -> {error, {badopt, {payload, {max_bytes, N}}}}
    end;
check_opts([{tags, Tags} = O | T], Acc) when is_list(Tags) ->
    case Tags =/= [] andalso lists:all(fun(Tag) -> lists:member(Tag, ?TAGS) end, Tags) of
        true -> check_opts(T, Acc#{tags := lists:usort(Tags)});
        false -> {error, {badopt, O}}
    end;
check_opts([O | _], _) ->
    {error, {badopt, O}};
check_opts(Improper, _) ->
    {error, {badopt, Improper}}.

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
set(Ring, Config) when is_map(Config) ->
    case check_config(maps:to_list(Config), {undefined, undefined, undefined}) of
        {ok, {Paused, Tags, Sample}} -> set_nif(Ring, Paused, Tags, Sample);
        {error, _} = E -> E
    end;
set(_Ring, Config) ->
    {error, {badopt, Config}}.

check_config([], Acc) ->
    {ok, Acc};
check_config([{paused, P} | T], {_, Tags, S}) when is_boolean(P) ->
    check_config(T, {P, Tags, S});
check_config([{tags, all} | T], {P, _, S}) ->
    check_config(T, {P, true, S});
check_config([{tags, Tags} = O | T], {P, _, S}) when is_list(Tags) ->
    case Tags =/= [] andalso lists:all(fun(Tag) -> lists:member(Tag, ?TAGS) end, Tags) of
        true -> check_config(T, {P, lists:usort(Tags), S});
        false -> {error, {badopt, O}}
    end;
check_config([{sample, N} | T], {P, Tags, _}) when is_integer(N), N >= 1, N < 1 bsl 32 ->
    check_config(T, {P, Tags, N});
check_config([O | _], _) ->
    {error, {badopt, O}}.

set_nif(_Ring, _Paused, _Tags, _Sample) ->
    erlang:nif_error(not_loaded).

%% @doc Removes and returns every event recorded so far, oldest first.
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

drain_loop(Ring, Left, Acc) ->
    Ask = min(Left, ?CHUNK),
    Chunk = drain_chunk(Ring, Ask),
    Got = length(Chunk),
    Acc1 = [Chunk | Acc],
    case Got < Ask orelse Left =:= Got of
        true -> lists:append(lists:reverse(Acc1));
        false -> drain_loop(Ring, Left - Got, Acc1)
    end.

drain_all(_Ring) ->
    erlang:nif_error(not_loaded).

drain_chunk(_Ring, _Max) ->
    erlang:nif_error(not_loaded).

%% @doc Counters of the ring. `written' events were recorded and
%% `dropped' were offered but not recorded (the ring was full, or the event
%% came from a thread without a ring of its own): their sum is every event
%% the VM offered. `overwritten' recorded events gave way to newer ones
%% (policy `overwrite');
%% `filtered' were refused by the `tags', `paused' or `sample' settings;
%% `drained' were handed out by drain; `buffered' wait to be drained;
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

%% @doc The number of rings in this node whose memory is not freed yet. A
%% ring is freed when nothing refers to it any more: neither a process
%% (its handle) nor the VM (a tracer or seq tracer using it). Useful to
%% check that tracing cleaned up after itself.
-spec alive() -> non_neg_integer().
alive() ->
    erlang:nif_error(not_loaded).

%%% erl_tracer callbacks ------------------------------------------------------

%% @private
enabled(_Tag, _Ring, _Tracee) -> erlang:nif_error(not_loaded).
%% @private
trace(_Tag, _Ring, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
%% @private
enabled_send(_Tag, _Ring, _Tracee) -> erlang:nif_error(not_loaded).
%% @private
trace_send(_Tag, _Ring, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
%% @private
enabled_receive(_Tag, _Ring, _Tracee) -> erlang:nif_error(not_loaded).
%% @private
trace_receive(_Tag, _Ring, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
%% @private
enabled_call(_Tag, _Ring, _Tracee) -> erlang:nif_error(not_loaded).
%% @private
trace_call(_Tag, _Ring, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
%% @private
enabled_procs(_Tag, _Ring, _Tracee) -> erlang:nif_error(not_loaded).
%% @private
trace_procs(_Tag, _Ring, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
%% @private
enabled_ports(_Tag, _Ring, _Tracee) -> erlang:nif_error(not_loaded).
%% @private
trace_ports(_Tag, _Ring, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
%% @private
enabled_running_procs(_Tag, _Ring, _Tracee) -> erlang:nif_error(not_loaded).
%% @private
trace_running_procs(_Tag, _Ring, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
%% @private
enabled_running_ports(_Tag, _Ring, _Tracee) -> erlang:nif_error(not_loaded).
%% @private
trace_running_ports(_Tag, _Ring, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
%% @private
enabled_garbage_collection(_Tag, _Ring, _Tracee) -> erlang:nif_error(not_loaded).
%% @private
trace_garbage_collection(_Tag, _Ring, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
