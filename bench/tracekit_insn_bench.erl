%% @private The workload whose instructions `make bench` counts under
%% qemu-user (scripts/bench, build/bench/qemu_insns.so): N events of one
%% kind traced into a tracekit_ring session (payload full, timestamps, a
%% ring of 4 MiB that never fills, so that no eviction is counted), then
%% the VM stops. `send`: a process sends `{req, Pid, I}` to another;
%% `call`: a process calls a local function traced with return_trace (a
%% call and its return_from per call). Run as
%% `-run tracekit_insn_bench main send|call N` in a VM of one scheduler;
%% the count of a run of N events less that of a run of fewer is what the
%% events cost.
-module(tracekit_insn_bench).
-export([main/1, f/1]).

%% @private The traced local function.
f(X) -> X.

main([W, NS]) ->
    N = list_to_integer(NS),
    {ok, R} = tracekit_ring:new(#{size => 4 bsl 20, policy => overwrite}),
    S = trace:session_create(?MODULE, {tracekit_ring, R}, []),
    Sink = spawn(fun Loop() -> receive _ -> Loop() end end),
    Self = self(),
    Worker = spawn(fun() -> receive go -> ok end, work(W, Sink, N), Self ! done end),
    case W of
        "send" ->
            1 = trace:process(S, Worker, true, [send, timestamp]);
        "call" ->
            1 = trace:process(S, Worker, true, [call, timestamp]),
            1 = trace:function(S, {?MODULE, f, 1}, [{'_', [], [{return_trace}]}], [local])
    end,
    Worker ! go,
    receive done -> ok end,
    trace:session_destroy(S),
    #{written := Written, overwritten := 0, dropped := 0} = tracekit_ring:stats(R),
    io:format("~s ~b: ~b records~n", [W, N, Written]),
    halt().

work(_, _, 0) -> ok;
work("send", Sink, I) -> Sink ! {req, self(), I}, work("send", Sink, I - 1);
work("call", Sink, I) -> _ = f(I), work("call", Sink, I - 1).
