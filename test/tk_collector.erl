%% @doc Test helper: a process tracer that keeps what it receives, and
%% helpers to wait for trace delivery. Used as the reference ("what OTP's
%% own process tracer gets") in differential tests.
-module(tk_collector).

-export([start/0, stop/1, events/1, count_tags/1, sync/2, sync_all/2,
         wait_dead/1, eventually/1]).

-include_lib("stdlib/include/assert.hrl").

%% Starts a collector; its pid is what trace sessions use as tracer.
start() ->
    spawn(fun() -> loop([]) end).

stop(C) ->
    exit(C, kill).

%% Every message received so far, in arrival order.
events(C) ->
    C ! {'$get', self()},
    receive {'$events', C, Es} -> Es after 10000 -> error(collector_timeout) end.

loop(Acc) ->
    receive
        {'$get', From} -> From ! {'$events', self(), lists:reverse(Acc)}, loop(Acc);
        M -> loop([M | Acc])
    end.

%% #{Tag => N} of trace messages, the way tracekit_count:read/1 counts.
count_tags(Events) ->
    lists:foldl(fun(E, M) -> maps:update_with(tag(E), fun(N) -> N + 1 end, 1, M) end,
                #{}, Events).

tag(E) when element(1, E) =:= trace; element(1, E) =:= trace_ts -> element(3, E);
tag(E) when element(1, E) =:= seq_trace -> seq_trace.

%% Waits until every trace message of Tracee in Session has reached its
%% tracer.
sync(Session, Tracee) ->
    Ref = trace:delivered(Session, Tracee),
    receive {trace_delivered, _, Ref} -> ok after 10000 -> error(delivered_timeout) end.
%% (Tracee may be `all'.)

sync_all(Session, Tracees) ->
    [sync(Session, T) || T <- Tracees],
    ok.

wait_dead(Pids) ->
    Ms = [monitor(process, P) || P <- Pids],
    [receive {'DOWN', M, process, _, _} -> ok after 10000 -> error(not_dead) end
     || M <- Ms],
    ok.

%% Polls Pred every 10 ms until it holds, for up to 15 s (a VM under
%% AddressSanitizer is slow to free); then asserts it.
eventually(Pred) -> eventually(Pred, 1500).
eventually(Pred, 0) -> ?assert(Pred());
eventually(Pred, N) ->
    case Pred() of
        true -> ok;
        false -> timer:sleep(10), eventually(Pred, N - 1)
    end.
