%% @doc `make bench': tracekit_ring and tracekit_file against the other
%% ways to trace, side by side in one VM run.
%%
%% Two workloads: a process sending small messages to another, and a
%% process calling a traced local function f/1. Each tracer runs every
%% workload REPS times, the tracers interleaved within each repetition so
%% that machine noise hits all of them alike; the table shows medians, and
%% the targets are checked as ratios of medians from this same run.
%% Then: memory during 5 s of overload, the drain rate, and the rate a
%% trace file sustains (beside dbg's file port and the process tracer).
-module(tracekit_bench).

-export([main/0, main/1, drain_main/1, f/1, stack_main/1]).

-define(REPS, 11).
-define(SEND_N, 200000).
-define(CALL_N, 400000).

-define(TRACERS, [none, empty_discard, empty_trace, floor, ring_none, ring_full,
                  ring_full_drop, file, process, dbg_file | ?RING_SIZES]).
%% tracekit_ring, payload full, at each ring size under both policies (the
%% 1 MiB overwrite ring is ring_full): recording, never full. A drop ring
%% too small for a whole run ({ring, Size, drop, Chunk}) is drained by the
%% worker after every Chunk events, outside the timing; short runs between
%% drains change the workload (the sink catches up, the scheduler is
%% rarely preempted within one), so those rows compare with the 1 MiB
%% overwrite ring drained the same way.
-define(RING_SIZES, [{ring, 64 bsl 10, overwrite}, {ring, 32 bsl 20, overwrite},
                     {ring, 256 bsl 20, overwrite},
                     {ring, 1 bsl 20, overwrite, 200},
                     {ring, 64 bsl 10, drop, 200}, {ring, 1 bsl 20, drop, 200},
                     {ring, 32 bsl 20, drop}, {ring, 256 bsl 20, drop}]).

main() ->
    main(#{}).

main(Opts) ->
    %% A tracer module must be loaded before a session can use it.
    [{module, _} = code:ensure_loaded(M) || M <- [tk_bench_tracer, tracekit_ring, tracekit_file]],
    Reps = maps:get(reps, Opts, ?REPS),
    io:format("tracekit benchmarks: OTP ~s, erts ~s, ~p schedulers, ~p reps "
              "(medians)~n~n",
              [erlang:system_info(otp_release), erlang:system_info(version),
               erlang:system_info(schedulers_online), Reps]),
    Tracers = maps:get(tracers, Opts, ?TRACERS),
    Results = [{W, run_workload(W, Tracers, Reps)} || W <- maps:get(workloads, Opts, [send, call])],
    [print_table(W, Tracers, R) || {W, R} <- Results],
    case Opts of
        #{tables_only := true} -> ok;
        #{} -> stack_main(Reps), rest(Results, Opts)
    end.

rest(Results, Opts) ->
    Checks = targets(Results),
    Mem = memory_overload(maps:get(overload_ms, Opts, 5000)),
    Drain = drain_rate("defaults"),
    Sustained = sustained(maps:get(sustain_ms, Opts, 10000)),
    Checks2 = Checks ++ Mem ++ Drain ++ Sustained,
    io:format("~ntargets:~n"),
    [io:format("  ~-62s ~8s  ~s~n", [Name, fmt(Value), verdict(Ok)])
     || {Name, Value, Ok} <- Checks2],
    Failed = [N || {N, _, false} <- Checks2],
    io:format("~n~p of ~p targets met~n", [length(Checks2) - length(Failed), length(Checks2)]),
    ok.

verdict(true) -> "ok";
verdict(false) -> "MISSED".

fmt(V) when is_float(V) -> io_lib:format("~.2f", [V]);
fmt(V) -> io_lib:format("~p", [V]).

%%% Timing ---------------------------------------------------------------------

%% #{Tracer => [{ns per event, minor page faults per event}]}.
run_workload(W, Tracers, Reps) ->
    %% Each repetition runs the tracers in a new random order.
    Rounds = [[{T, once(W, T)} || T <- shuffle(Tracers)] || _ <- lists:seq(1, Reps)],
    maps:groups_from_list(fun({T, _}) -> T end, fun({_, V}) -> V end,
                          lists:append(Rounds)).

shuffle(L) ->
    [X || {_, X} <- lists:sort([{rand:uniform(), X} || X <- L])].

median(L) ->
    S = lists:sort(L),
    lists:nth((length(S) + 1) div 2, S).

%% One timed run of workload W under tracer T: ns and minor page faults
%% (of the whole OS process) per event.
once(W, T) ->
    N = case W of send -> ?SEND_N; call -> ?CALL_N end,
    Sink = spawn(fun sink/0),
    Self = self(),
    Worker = spawn(fun() ->
                           {Chunk, Between} = receive {go, C, B} -> {C, B} end,
                           %% Warm-up: the scheduler's ring (or the
                           %% tracer's first-use work) is set up here.
                           run(W, Sink, 1000),
                           Between(),
                           Self ! {done, self(), chunks(W, Sink, N, Chunk, Between, {0, 0, 0})}
                   end),
    {Cleanup, Chunk, Between} = setup(T, W, Worker),
    Worker ! {go, Chunk, Between},
    {Ns, Faults, Cpu} = receive {done, Worker, D} -> D end,
    Cleanup(),
    exit(Sink, kill),
    {Ns / N, Faults / N, Cpu / N}.

%% N events in runs of Chunk, Between() after each, outside the timing (a
%% drop ring that would fill is drained there).
chunks(_W, _Sink, 0, _Chunk, _Between, Acc) ->
    Acc;
chunks(W, Sink, N, Chunk, Between, {Ns, Faults, Cpu}) ->
    C = min(N, Chunk),
    F0 = minor_faults(),
    C0 = sched_cpu_ns(),
    T0 = erlang:monotonic_time(nanosecond),
    run(W, Sink, C),
    T1 = erlang:monotonic_time(nanosecond),
    C1 = sched_cpu_ns(),
    F1 = minor_faults(),
    Between(),
    chunks(W, Sink, N - C, Chunk, Between, {Ns + T1 - T0, Faults + F1 - F0, Cpu + C1 - C0}).

%% CPU time of the normal scheduler threads so far (ns; Linux, 0
%% elsewhere): unlike wall time, not inflated when other programs take the
%% cores (meaningful with busy waiting off: +sbwt none).
sched_cpu_ns() ->
    Tasks = case get(tk_sched_tasks) of
                undefined ->
                    Ts = case file:list_dir("/proc/self/task") of
                             {ok, L} ->
                                 [T || T <- L,
                                       case file:read_file("/proc/self/task/" ++ T ++ "/comm") of
                                           {ok, Comm} -> binary:match(Comm, <<"erts_sched_">>) =/= nomatch;
                                           _ -> false
                                       end];
                             _ -> []
                         end,
                    put(tk_sched_tasks, Ts),
                    Ts;
                Ts -> Ts
            end,
    lists:sum([case file:read_file("/proc/self/task/" ++ T ++ "/schedstat") of
                   {ok, B} -> binary_to_integer(hd(binary:split(B, <<" ">>)));
                   _ -> 0
               end || T <- Tasks]).

run(send, Sink, N) -> send_loop(Sink, N);
run(call, _Sink, N) -> call_loop(N).

send_loop(_, 0) -> ok;
send_loop(Sink, N) -> Sink ! {m, N}, send_loop(Sink, N - 1).

call_loop(0) -> ok;
call_loop(N) -> _ = f(N), call_loop(N - 1).

%% @private The traced local function.
f(X) -> X.

sink() ->
    receive _ -> sink() end.

%% Starts tracer T on the worker; returns the fun that stops it, the
%% events the worker runs between two calls of the third element.
setup(none, _W, _Worker) ->
    {fun() -> ok end, infinity, fun() -> ok end};
setup(T, W, Worker) ->
    {Tracer, Stop, Chunk, Between} = case tracer(T) of
                                         {Tr, St} -> {Tr, St, infinity, fun() -> ok end};
                                         WithChunks -> WithChunks
                                     end,
    S = trace:session_create(bench, Tracer, []),
    Flags = case W of send -> [send]; call -> [call] end,
    1 = trace:process(S, Worker, true, Flags),
    W =:= call andalso (1 = trace:function(S, {?MODULE, f, 1}, true, [local])),
    {fun() -> trace:session_destroy(S), Stop() end, Chunk, Between}.

tracer(empty_discard) ->
    {{tk_bench_tracer, discard}, fun() -> ok end};
tracer(empty_trace) ->
    {{tk_bench_tracer, trace}, fun() -> ok end};
tracer(floor) ->
    {{tk_bench_tracer, tk_bench_tracer:floor_new()}, fun() -> ok end};
%% The default 1 MiB ring, recording all the time: overwrite, the steady
%% state of a ring that keeps recording (under drop a full ring stops
%% recording: that is ring_full_drop).
tracer(ring_none) ->
    ring_tracer(#{payload => none, policy => overwrite});
tracer(ring_full) ->
    ring_tracer(#{policy => overwrite});
%% A ring of each size, recording: under overwrite, the steady state; under
%% drop, a ring that is never full: when too small to keep a whole run, it
%% is drained by the worker itself every Chunk events (a record of these
%% workloads takes at most 128 bytes), outside the timing.
tracer({ring, Size, Policy}) ->
    ring_tracer(#{size => Size, policy => Policy});
tracer({ring, Size, Policy, Chunk}) ->
    {Tracer, Stop} = ring_tracer(#{size => Size, policy => Policy}),
    {tracekit_ring, R} = Tracer,
    {Tracer, Stop, Chunk, fun() -> _ = tracekit_ring:drain(R), garbage_collect() end};
tracer(ring_full_drop) ->
    %% A small ring, filled before the run: every event is refused in
    %% enabled_*, before the VM builds it.
    {ok, R} = tracekit_ring:new(#{size => 4096}),
    fill_until_refused(R, 10000),
    false = (trace =:= tracekit_ring:enabled_send(send, R, self())),
    {{tracekit_ring, R}, fun() -> tracekit_ring:close(R) end};
%% A trace file (default 1 MiB buffer per scheduler), its writer thread
%% writing while the run goes on.
tracer(file) ->
    Path = filename:join(bench_dir(), "bench.tkt"),
    {ok, F} = tracekit_file:new(#{path => Path}),
    {{tracekit_file, F},
     fun() -> ok = tracekit_file:close(F), file:delete(Path) end};
tracer(process) ->
    P = spawn(fun sink/0),
    {P, fun() -> wait_empty(P), exit(P, kill) end};
tracer(dbg_file) ->
    File = filename:join(bench_dir(), "dbg.trace"),
    Port = (dbg:trace_port(file, File))(),
    {Port, fun() -> erlang:port_close(Port), file:delete(File) end}.

%% Sends into the ring until enabled_send refuses them (at most N).
fill_until_refused(_R, 0) ->
    ok;
fill_until_refused(R, N) ->
    case tracekit_ring:enabled_send(send, R, self()) of
        trace -> ok = tracekit_ring:trace_send(send, R, self(), fill, #{}),
                 fill_until_refused(R, N - 1);
        _ -> ok
    end.

ring_tracer(Opts) ->
    {ok, R} = tracekit_ring:new(Opts),
    {{tracekit_ring, R},
     fun() ->
             #{dropped := 0} = tracekit_ring:stats(R),
             _ = tracekit_ring:drain(R),
             tracekit_ring:close(R)
     end}.

%% The process tracer's mailbox is emptied between runs (not timed).
wait_empty(P) ->
    case process_info(P, message_queue_len) of
        {message_queue_len, 0} -> ok;
        undefined -> ok;
        _ -> timer:sleep(10), wait_empty(P)
    end.

bench_dir() ->
    Dir = filename:join(["build", "bench"]),
    ok = filelib:ensure_path(Dir),
    Dir.

%%% Report ---------------------------------------------------------------------

label(none) -> "untraced";
label(empty_discard) -> "empty NIF tracer, enabled answers discard";
label(empty_trace) -> "empty NIF tracer, enabled answers trace";
label(floor) -> "floor: state lookups, ordered stamp, 4-word record";
label(ring_none) -> "tracekit_ring, payload none";
label(ring_full) -> "tracekit_ring, payload full";
label({ring, Size, Policy}) ->
    lists:flatten(io_lib:format("tracekit_ring, full, ~s, ~s", [size_label(Size), Policy]));
label({ring, Size, Policy, Chunk}) ->
    lists:flatten(io_lib:format("tracekit_ring, full, ~s, ~s /~w",
                                [size_label(Size), Policy, Chunk]));
label(ring_full_drop) -> "tracekit_ring, full ring under drop";
label(file) -> "tracekit_file, payload full, 1 MiB buffers";
label(process) -> "process tracer (discards)";
label(dbg_file) -> "dbg file port tracer".

%% The 1 MiB ring a ring of the size rows compares with (none: not one).
ring_ref({ring, _, _}) -> ring_full;
ring_ref({ring, _, _, Chunk}) -> {ring, 1 bsl 20, overwrite, Chunk};
ring_ref(_) -> none.

size_label(S) when S >= 1 bsl 20 -> integer_to_list(S bsr 20) ++ " MiB";
size_label(S) -> integer_to_list(S bsr 10) ++ " KiB".

print_table(W, Tracers, R) ->
    M = maps:map(fun(_, L) -> median([Ns || {Ns, _, _} <- L]) end, R),
    Faults = maps:map(fun(_, L) -> median([F || {_, F, _} <- L]) end, R),
    Cpu = maps:map(fun(_, L) -> median([C || {_, _, C} <- L]) end, R),
    CpuEmpty = case maps:get(empty_trace, Cpu, 0) of 0 -> 1; CE -> CE end,
    Base = maps:get(none, M, 0.0),
    Empty = maps:get(empty_trace, M, 1.0),
    Ring = maps:get(ring_full, M, 1.0),
    io:format("workload: ~s~n"
              "  (tracekit_ring: 1 MiB per scheduler, overwrite, unless said)~n",
              [case W of
                                    send -> "a process sending small messages";
                                    call -> "a process calling a traced local function f/1"
                                end]),
    io:format("  ~-44s ~9s ~8s ~13s ~12s ~10s ~9s ~8s~n",
              ["tracer", "ns/event", "x empty", "x 1 MiB ring", "over untraced",
               "faults/1k", "sched cpu", "x empty"]),
    [io:format("  ~-44s ~9.1f ~8.2f ~13s ~12.1f ~10.2f ~9.1f ~8.2f~n",
               [label(T), maps:get(T, M), maps:get(T, M) / Empty,
                case ring_ref(T) of
                    none -> "";
                    Ref -> io_lib:format("~.2f", [maps:get(T, M) / maps:get(Ref, M, Ring)])
                end,
                maps:get(T, M) - Base, 1000 * maps:get(T, Faults),
                maps:get(T, Cpu), maps:get(T, Cpu) / CpuEmpty])
     || T <- Tracers],
    case maps:is_key(floor, M) andalso maps:is_key(ring_none, M) of
        true ->
            io:format("  tracekit_ring over the floor: payload none ~.2f x, payload full ~.2f x~n~n",
                      [maps:get(ring_none, M) / maps:get(floor, M),
                       maps:get(ring_full, M) / maps:get(floor, M)]);
        false ->
            io:format("~n")
    end.

targets(Results) ->
    lists:append(
      [begin
           M = maps:map(fun(_, L) -> median([Ns || {Ns, _, _} <- L]) end, R),
           G = fun(T) -> maps:get(T, M) end,
           Over = fun(T) -> G(T) - G(none) end,
           P = atom_to_list(W) ++ ": ",
           [{P ++ "ring payload none / empty tracer (trace) <= 1.10",
             G(ring_none) / G(empty_trace), G(ring_none) / G(empty_trace) =< 1.10},
            {P ++ "ring payload full / empty tracer (trace) <= 1.25",
             G(ring_full) / G(empty_trace), G(ring_full) / G(empty_trace) =< 1.25},
            {P ++ "full ring under drop / empty tracer (discard) <= 1.05",
             G(ring_full_drop) / G(empty_discard),
             G(ring_full_drop) / G(empty_discard) =< 1.05},
            {P ++ "ring (full) cost / process tracer cost <= 0.35",
             Over(ring_full) / Over(process), Over(ring_full) / Over(process) =< 0.35},
            {P ++ "file / ring (payload full) <= 1.10",
             G(file) / G(ring_full), G(file) / G(ring_full) =< 1.10}] ++
           [{P ++ label(T) ++ " / 1 MiB ring <= 1.10",
             G(T) / G(ring_ref(T)), G(T) / G(ring_ref(T)) =< 1.10}
            || T <- ?RING_SIZES, ring_ref(T) =/= T]
       end || {W, R} <- Results]).

%%% Callers, stacks and printing -----------------------------------------------

%% The call workload under a ring with the match spec actions of
%% `-> caller' and `-> stack' (tracekit's default depth, 8 frames plus
%% one), beside a plain call trace, f/1 called 8 calls deep; then what a
%% line costs to print with the shell's options and without them.
stack_main(Reps) ->
    Rows = [{plain, true},
            {caller, [{'_', [], [{message, {{caller, {caller}}}}]}]},
            {stack, [{'_', [], [{message, {{stack, {current_stacktrace, 9}}}}]}]}],
    Runs = [[{Name, stack_once(MS)} || {Name, MS} <- shuffle(Rows)] || _ <- lists:seq(1, Reps)],
    M = maps:map(fun(_, L) -> median(L) end,
                 maps:groups_from_list(fun({N, _}) -> N end, fun({_, V}) -> V end,
                                       lists:append(Runs))),
    io:format("workload: a process calling a traced local function f/1, 8 calls deep~n"
              "  (tracekit_ring, 1 MiB per scheduler, overwrite, payload full)~n"),
    io:format("  ~-44s ~9s ~11s~n", ["match spec", "ns/event", "x plain"]),
    [io:format("  ~-44s ~9.1f ~11.2f~n", [Label, maps:get(N, M), maps:get(N, M) / maps:get(plain, M)])
     || {N, Label} <- [{plain, "call trace (true)"}, {caller, "-> caller ({caller})"},
                       {stack, "-> stack ({current_stacktrace, 9})"}]],
    print_costs().

stack_once(MS) ->
    N = ?CALL_N div 4,
    Self = self(),
    Worker = spawn(fun() ->
                           receive go -> ok end,
                           nest(8, fun() ->
                                           call_loop(1000),
                                           T0 = erlang:monotonic_time(nanosecond),
                                           call_loop(N),
                                           T1 = erlang:monotonic_time(nanosecond),
                                           Self ! {done, self(), T1 - T0}
                                   end)
                   end),
    {ok, R} = tracekit_ring:new(#{policy => overwrite}),
    S = trace:session_create(bench, {tracekit_ring, R}, []),
    1 = trace:process(S, Worker, true, [call]),
    1 = trace:function(S, {?MODULE, f, 1}, MS, [local]),
    Worker ! go,
    Ns = receive {done, Worker, D} -> D end,
    trace:session_destroy(S),
    _ = tracekit_ring:drain(R),
    tracekit_ring:close(R),
    Ns / N.

nest(0, Fun) -> Fun(), ok;
nest(K, Fun) -> ok = nest(K - 1, Fun), ok.

%% Microseconds and reductions per line of tracekit_format:event/2 for a
%% gen_server call and a call with its stack: plain (as
%% tracekit_file:format prints), then with a record definition, reference
%% tags, stacks and colours (as the shell prints). Reductions do not
%% depend on the machine's load.
print_costs() ->
    Ref = make_ref(),
    Pid = self(),
    Call = {trace_ts, Pid, call,
            {my_server, handle_call, [{get, color}, {Pid, [alias | Ref]},
                                      {state, 3, #{color => blue}, [a, b]}]},
            os:timestamp()},
    Stack = {trace_ts, Pid, call, {?MODULE, f, [1]},
             {stack, [{?MODULE, nest, 2, [{file, "bench/tracekit_bench.erl"}, {line, I}]}
                      || I <- lists:seq(1, 9)]}, os:timestamp()},
    Refs = tracekit_format:ref_tags(tracekit_format:tag_refs(Ref, tracekit_format:new_ref_table())),
    Shell = #{records => #{{state, 3} => [count, data, items]}, refs => Refs, stacks => 8,
              colour => true},
    io:format("~n  printing a line (tracekit_format:event/2)    us/line (reductions): plain    shell~n"),
    [begin
         {Plain, PlainR} = per_line(E, #{}),
         {Pretty, PrettyR} = per_line(E, Shell),
         io:format("  ~-44s ~9.1f (~5w) ~9.1f (~5w)~n", [Label, Plain, PlainR, Pretty, PrettyR])
     end || {Label, E} <- [{"gen_server call with a record and an alias", Call},
                           {"call with a stack of 9 frames", Stack}]],
    io:format("~n").

per_line(E, Opts) ->
    N = 20000,
    _ = tracekit_format:event(E, Opts),
    {reductions, R0} = erlang:process_info(self(), reductions),
    {Us, _} = timer:tc(fun() -> lists:foreach(fun(_) -> tracekit_format:event(E, Opts) end,
                                              lists:seq(1, N)) end),
    {reductions, R1} = erlang:process_info(self(), reductions),
    {Us / N, (R1 - R0) div N}.

%%% Memory under overload -------------------------------------------------------

%% Two senders (one per scheduler, as far as the VM places them) send as
%% fast as they can for Ms milliseconds; the VM's total memory is sampled.
memory_overload(Ms) ->
    Size = 4 bsl 20,
    {ok, R} = tracekit_ring:new(#{size => Size}),
    RingGrowth = overload({tracekit_ring, R}, Ms),
    #{dropped := Dropped, written := Written, producers := Producers} = tracekit_ring:stats(R),
    tracekit_ring:close(R),
    Tracer = spawn(fun sink/0),
    ProcGrowth = overload(Tracer, Ms),
    exit(Tracer, kill),
    Limit = Producers * Size + 16 bsl 20,
    io:format("memory during ~p ms of overload from 2 senders:~n"
              "  tracekit_ring (~p rings of ~p MiB): +~.1f MiB (~p events kept, ~p dropped)~n"
              "  process tracer:                     +~.1f MiB~n~n",
              [Ms, Producers, Size bsr 20, RingGrowth / (1 bsl 20), Written, Dropped,
               ProcGrowth / (1 bsl 20)]),
    [{"memory: ring growth <= rings' size + 16 MiB (MiB)",
      round(RingGrowth / (1 bsl 20)), RingGrowth =< Limit}].

overload(Tracer, Ms) ->
    garbage_collect(),
    M0 = erlang:memory(total),
    S = trace:session_create(bench_overload, Tracer, []),
    Sinks = [spawn(fun sink/0) || _ <- [1, 2]],
    Senders = [spawn(fun() -> blast(Sink) end) || Sink <- Sinks],
    [1 = trace:process(S, P, true, [send]) || P <- Senders],
    Peak = sample(M0, M0, erlang:monotonic_time(millisecond) + Ms),
    trace:session_destroy(S),
    [exit(P, kill) || P <- Senders ++ Sinks],
    Peak - M0.

blast(Sink) ->
    [Sink ! {m, I} || I <- lists:seq(1, 1000)],
    blast(Sink).

sample(M0, Peak, Until) ->
    sample(fun() -> erlang:memory(total) end, M0, Peak, Until).

sample(Mem, M0, Peak, Until) ->
    Now = erlang:monotonic_time(millisecond),
    M = Mem(),
    %% A process tracer can take the node down: stop at 2 GiB.
    case Now >= Until orelse M - M0 > 2 bsl 30 of
        true -> max(Peak, M);
        false -> timer:sleep(50), sample(Mem, M0, max(Peak, M), Until)
    end.

%%% Drain rate ---------------------------------------------------------------------

%% drain/1 of 1,000,000 send events, five times by one process; the first
%% drain is cold, the others warm (the steady state of a process that
%% drains repeatedly). The previous result is collected between drains,
%% outside the timing: collecting old garbage is not part of delivering new
%% events.
%%
%% A million events are about 90 MB of terms in the caller's heap. Memory
%% the VM's allocators take from the OS is new to the process, and each of
%% its pages costs a page fault at first touch: about 11 us on the virtual
%% machines the README's numbers come from (50 times bare metal), which
%% for 23,000 pages is most of a drain. The minor page faults of each drain are
%% printed beside its rate. `make bench' runs this part a second time in a
%% VM started with +MMmcs 100, where the allocator keeps freed segments
%% mapped for reuse.
drain_rate(Flags) ->
    N = 1000000,
    Self = self(),
    Drainer = spawn(fun() -> drainer(Self) end),
    Runs = [begin
                {ok, R} = tracekit_ring:new(#{size => 128 bsl 20}),
                fill(R, N),
                Drainer ! {drain, R},
                {Count, Ns, Faults} = receive {drained, Drainer, C, D, F} -> {C, D, F} end,
                Count = N + 1, % the worker's `done' is recorded too
                tracekit_ring:close(R),
                {Count / (Ns / 1.0e9), Faults}
            end || _ <- lists:seq(1, 5)],
    exit(Drainer, kill),
    [{Cold, _} | Warm] = Runs,
    Rate = median([W || {W, _} <- Warm]),
    io:format("drain/1 of ~p events (VM flags: ~s): cold ~.2f, warm ~s million events/s~n"
              "  (minor page faults per drain: ~s)~n",
              [N, Flags, Cold / 1.0e6,
               lists:join(", ", [io_lib:format("~.2f", [W / 1.0e6]) || {W, _} <- Warm]),
               lists:join(", ", [integer_to_list(F) || {_, F} <- Runs])]),
    [{"drain/1 rate >= 3 million events/s, warm (millions)", Rate / 1.0e6, Rate >= 3.0e6}].

%% Only the drain rate, in a VM started with other allocator settings
%% (`Flags', for the label): `make bench' runs it so.
drain_main(Flags) ->
    {module, _} = code:ensure_loaded(tracekit_ring),
    [{Name, Value, Ok}] = drain_rate(Flags),
    io:format("  ~-62s ~8s  ~s~n", [Name, fmt(Value), verdict(Ok)]).

drainer(Parent) ->
    receive
        {drain, R} ->
            F0 = minor_faults(),
            T0 = erlang:monotonic_time(nanosecond),
            Evs = tracekit_ring:drain(R),
            T1 = erlang:monotonic_time(nanosecond),
            F1 = minor_faults(),
            Parent ! {drained, self(), length(Evs), T1 - T0, F1 - F0},
            erlang:garbage_collect(),
            drainer(Parent)
    end.

%% The OS process's minor page faults so far (Linux; 0 elsewhere).
minor_faults() ->
    case file:read_file("/proc/self/stat") of
        {ok, Stat} ->
            %% The fields after the command name; minflt is the 8th.
            [_, Rest] = binary:split(Stat, <<") ">>),
            binary_to_integer(lists:nth(8, binary:split(Rest, <<" ">>, [global])));
        {error, _} ->
            0
    end.

fill(R, N) ->
    S = trace:session_create(bench_drain, {tracekit_ring, R}, []),
    Sink = spawn(fun sink/0),
    Self = self(),
    W = spawn(fun() -> receive go -> send_loop(Sink, N), Self ! done end end),
    1 = trace:process(S, W, true, [send]),
    W ! go,
    receive done -> ok end,
    trace:session_destroy(S),
    exit(Sink, kill).

%%% Sustained rate to disk -------------------------------------------------------

%% Two senders (one per scheduler) send at a fixed total rate, each traced
%% into the same tracer: steps of rising rate, each for StepMs, until a
%% trace file loses events; then the highest rate without loss again for
%% Ms (if it loses then, the next lower rate, and so on). dbg's file port
%% and the process tracer run that rate beside it (they never drop: their
%% queues grow). Reported: the rate asked for and the rate the senders
%% reached (the events the VM offered per second), events written with no
%% loss, the rate where loss begins, the VM's memory growth (without the
%% receivers' mailboxes, which grow when they fall behind whatever the
%% tracer), and bytes per event on disk.
sustained(Ms) ->
    StepMs = 2000,
    Rates = [100000, 200000, 400000, 800000, 1600000, 3200000],
    io:format("~ntrace files under a sustained rate (2 senders, ~p ms steps):~n"
              "  ~-10s ~-10s ~-10s ~12s ~10s ~10s ~10s~n",
              [StepMs, "rate/s", "reached/s", "tracer", "written", "lost", "mem +MiB",
               "bytes/ev"]),
    Steps = sustain_steps(Rates, StepMs),
    Ok = lists:reverse(lists:sort([R || {R, #{lost := 0}} <- Steps])),
    {Best, Long, Tried} = confirm(Ok, Ms, []),
    LossAt = case [R || {R, #{lost := L}} <- Steps ++ Tried, L > 0] of
                 [] -> none;
                 Ls -> lists:min(Ls)
             end,
    Dbg = step(dbg_file, Best, StepMs),
    Proc = step(process, Best, StepMs),
    [print_step(Best, T, R) || {T, R} <- [{dbg_file, Dbg}, {process, Proc}]],
    io:format("  highest rate without loss: ~p/s in ~p ms steps, confirmed over ~p ms; "
              "loss begins at ~p/s~n",
              [Best, StepMs, Ms, LossAt]),
    Buffers = 2 * (1 bsl 20),
    [{"file: events/s written with no loss for 10 s (thousands)", Best div 1000,
      maps:get(lost, Long) =:= 0 andalso Best > 0},
     {"file: memory growth <= buffers + 16 MiB (MiB)", maps:get(mem, Long) bsr 20,
      maps:get(mem, Long) =< Buffers + (16 bsl 20)},
     {"file: bytes per event / dbg's", ratio(Long, Dbg), ratio(Long, Dbg) =< 1.0}].

ratio(#{bytes := B1, written := W1}, #{bytes := B2, written := W2}) when W1 > 0, W2 > 0 ->
    (B1 / W1) / (B2 / W2);
ratio(_, _) ->
    0.0.

%% The highest of Rates (highest first) that also loses nothing over Ms;
%% the runs that lost on the way.
confirm([], _Ms, Tried) ->
    {0, #{lost => 1, written => 0, mem => 0, bytes => 0, ms => 1}, Tried};
confirm([Rate | Lower], Ms, Tried) ->
    R = step(file, Rate, Ms),
    print_step(Rate, file, R),
    case R of
        #{lost := 0} -> {Rate, R, Tried};
        _ -> confirm(Lower, Ms, [{Rate, R} | Tried])
    end.

sustain_steps([], _) ->
    [];
sustain_steps([Rate | Rest], StepMs) ->
    R = step(file, Rate, StepMs),
    print_step(Rate, file, R),
    case R of
        #{lost := 0} -> [{Rate, R} | sustain_steps(Rest, StepMs)];
        _ -> [{Rate, R}]
    end.

print_step(Rate, T, #{written := W, lost := L, mem := M, bytes := B, ms := Ms}) ->
    io:format("  ~-10w ~-10w ~-10s ~12w ~10w ~10.1f ~10.1f~n",
              [Rate, (W + L) * 1000 div max(1, Ms), T, W, L, M / (1 bsl 20),
               case W of 0 -> 0.0; _ -> B / W end]).

%% One run of Ms at Rate events/s (both senders together) under tracer T.
step(T, Rate, Ms) ->
    garbage_collect(),
    M0 = erlang:memory(total),
    {Tracer, Finish} = sustain_tracer(T),
    S = trace:session_create(bench_sustain, Tracer, []),
    Sinks = [spawn(fun sink/0) || _ <- [1, 2]],
    Self = self(),
    T0 = erlang:monotonic_time(millisecond),
    Until = T0 + Ms,
    Senders = [spawn(fun() -> receive go -> ok end,
                              paced(Sink, Rate div 2, Until, 0),
                              Self ! {sent, self()}
                     end) || Sink <- Sinks],
    [1 = trace:process(S, P, true, [send]) || P <- Senders],
    [P ! go || P <- Senders],
    Mem = fun() ->
                  erlang:memory(total) -
                      lists:sum([M || P <- Sinks, {memory, M} <- [process_info(P, memory)]])
          end,
    Peak = sample(Mem, M0, M0, Until),
    [receive {sent, P} -> ok end || P <- Senders],
    Elapsed = erlang:monotonic_time(millisecond) - T0,
    trace:session_destroy(S),
    [exit(P, kill) || P <- Sinks],
    maps:merge(Finish(), #{mem => Peak - M0, ms => Elapsed}).

%% Sends PerSec messages a second, in batches every millisecond.
paced(Sink, PerSec, Until, Sent) ->
    Now = erlang:monotonic_time(millisecond),
    case Now >= Until of
        true -> Sent;
        false ->
            Batch = max(1, PerSec div 1000),
            [Sink ! {m, I} || I <- lists:seq(1, Batch)],
            Next = Now + 1,
            wait_until(Next),
            paced(Sink, PerSec, Until, Sent + Batch)
    end.

wait_until(T) ->
    case erlang:monotonic_time(millisecond) >= T of
        true -> ok;
        false -> erlang:yield(), wait_until(T)
    end.

sustain_tracer(file) ->
    Path = filename:join(bench_dir(), "sustain.tkt"),
    {ok, F} = tracekit_file:new(#{path => Path}),
    {{tracekit_file, F},
     fun() ->
             ok = tracekit_file:close(F),
             #{written := W, dropped := D, bytes := B} = tracekit_file:stats(F),
             file:delete(Path),
             #{written => W, lost => D, bytes => B}
     end};
sustain_tracer(dbg_file) ->
    Path = filename:join(bench_dir(), "sustain.dbg"),
    Port = (dbg:trace_port(file, Path))(),
    {Port,
     fun() ->
             %% The port writes what is queued before it closes.
             erlang:port_close(Port),
             {ok, Bin} = file:read_file(Path),
             file:delete(Path),
             #{written => dbg_records(Bin, 0), lost => 0, bytes => byte_size(Bin)}
     end};
sustain_tracer(process) ->
    P = spawn(fun() -> count(0) end),
    {P,
     fun() ->
             wait_empty(P),
             P ! {count, self()},
             N = receive {count, P, C} -> C end,
             exit(P, kill),
             #{written => N, lost => 0, bytes => 0}
     end}.

count(N) ->
    receive
        {count, From} -> From ! {count, self(), N}, count(N);
        _ -> count(N + 1)
    end.

%% dbg's file format: each message as <<0, Size:32, term_to_binary>>.
dbg_records(<<0, Size:32, _:Size/binary, Rest/binary>>, N) -> dbg_records(Rest, N + 1);
dbg_records(_, N) -> N.
