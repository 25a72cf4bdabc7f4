%% @doc `make bench', latency: tracekit_latency against what users would
%% pick instead, side by side in one VM run.
%%
%% The references are built the way xprof and Orion build theirs:
%% <ul>
%% <li>`process': a trace session whose tracer is an Erlang process that
%%   receives every call and return (`{exception_trace}', monotonic
%%   timestamps), pairs them per process and adds the duration to a
%%   histogram per function (a map of log-linear buckets), as a tracer
%%   process per node does;</li>
%% <li>`xprof': a tracer process that receives every call and return and
%%   hands each to a process of the function's own, which pairs them and
%%   counts the duration in an ETS table (xprof's handler per function
%%   and its ETS-backed histogram).</li>
%% </ul>
%% Beside them: tracekit_latency, tracekit_ring recording the same call
%% and return events (payload `none' and `full'), the empty NIF tracer,
%% and no tracing.
%%
%% 1. Cost per traced call: a process calling a traced local function
%%    f/1, each tracer in turn within each of REPS repetitions (a new
%%    random order each time), medians; the references' mailboxes are
%%    emptied between runs, outside the timing.
%% 2. At 100,000 and 1,000,000 calls/s offered (two processes calling at
%%    a fixed pace for PACE_MS): the VM's memory growth once tracing is
%%    set up, the longest queue of the receiving processes, the calls
%%    made (a loaded machine makes fewer than offered) and how many each
%%    tracer measured.
-module(tracekit_latency_bench).

-export([main/0, main/1, f/1]).
%% Shared with the other benchmarks of calls.
-export([cpu_ns/0, shuffle/1, median/1]).

-define(REPS, 11).
-define(CALLS, 200000).
-define(PACE_MS, 3000).
-define(TRACERS, [none, empty_trace, ring_none, ring_full, latency, process, xprof]).

%% @private The traced function.
f(X) -> X.

main() ->
    main(#{}).

main(Opts) ->
    [{module, _} = code:ensure_loaded(M)
     || M <- [tk_bench_tracer, tracekit_ring, tracekit_latency]],
    Reps = maps:get(reps, Opts, ?REPS),
    io:format("~ncall latency: tracekit_latency against a process tracer and xprof's "
              "way (~p reps, medians)~n", [Reps]),
    Rounds = [[{T, once(T)} || T <- shuffle(?TRACERS)] || _ <- lists:seq(1, Reps)],
    Runs = maps:groups_from_list(fun({T, _}) -> T end, fun({_, V}) -> V end,
                                 lists:append(Rounds)),
    M = maps:map(fun(_, L) -> median([W || {W, _} <- L]) end, Runs),
    Cpu = maps:map(fun(_, L) -> median([C || {_, C} <- L]) end, Runs),
    G = fun(T) -> maps:get(T, M) end,
    Over = fun(T) -> G(T) - G(none) end,
    C = fun(T) -> maps:get(T, Cpu) end,
    CpuOver = fun(T) -> C(T) - C(none) end,
    io:format("  (ns/call: the traced process's wall time; cpu/call: every thread of the VM,\n"
              "   the references' receiving processes and tracekit_latency's thread included,\n"
              "   until every call is counted)~n"),
    io:format("  ~-50s ~9s ~13s ~9s ~13s~n", ["tracer (a call and its return traced)", "ns/call",
                                             "over untraced", "cpu/call", "over untraced"]),
    [io:format("  ~-50s ~9.1f ~13.1f ~9.1f ~13.1f~n", [label(T), G(T), Over(T), C(T), CpuOver(T)])
     || T <- ?TRACERS],
    Paced = [paced(Rate, T) || Rate <- maps:get(rates, Opts, [100000, 1000000]),
                               T <- [latency, process, xprof]],
    io:format("~n  at a fixed pace (2 processes, ~p ms):~n"
              "  ~-10s ~-30s ~10s ~12s ~10s ~12s ~10s~n",
              [maps:get(pace_ms, Opts, ?PACE_MS), "offered/s", "tracer", "made/s", "measured",
               "dropped", "max queue", "mem +MiB"]),
    [io:format("  ~-10w ~-30s ~10w ~12w ~10w ~12w ~10.1f~n",
               [Rate, label(T), Made, Measured, Dropped, Queue, Mem / (1 bsl 20)])
     || {Rate, T, #{made := Made, measured := Measured, dropped := Dropped, queue := Queue,
                    mem := Mem}} <- Paced],
    Pace = fun(Rate, T) -> hd([R || {Ra, Tr, R} <- Paced, Ra =:= Rate, Tr =:= T]) end,
    Checks = [{"latency cost / process tracer's cost <= 0.3 (wall)", Over(latency) / Over(process),
               Over(latency) / Over(process) =< 0.3},
              {"latency cost / xprof's way's cost <= 0.3 (wall)", Over(latency) / Over(xprof),
               Over(latency) / Over(xprof) =< 0.3},
              {"latency cost / process tracer's cost <= 0.3 (cpu)",
               CpuOver(latency) / CpuOver(process), CpuOver(latency) / CpuOver(process) =< 0.3},
              {"latency cost / xprof's way's cost <= 0.3 (cpu)",
               CpuOver(latency) / CpuOver(xprof), CpuOver(latency) / CpuOver(xprof) =< 0.3},
              {"latency / ring (payload none), same events <= 1.15 (wall)",
               G(latency) / G(ring_none), G(latency) / G(ring_none) =< 1.15},
              {"latency / ring (payload full), same events <= 1.15 (wall)",
               G(latency) / G(ring_full), G(latency) / G(ring_full) =< 1.15},
              {"latency / ring (payload none), same events <= 1.15 (cpu)",
               C(latency) / C(ring_none), C(latency) / C(ring_none) =< 1.15},
              {"latency / ring (payload full), same events <= 1.15 (cpu)",
               C(latency) / C(ring_full), C(latency) / C(ring_full) =< 1.15}]
        ++ [{lists:flatten(io_lib:format("latency at ~w/s: no queue, memory flat (MiB)", [Rate])),
             maps:get(mem, Pace(Rate, latency)) / (1 bsl 20),
             maps:get(queue, Pace(Rate, latency)) =:= 0
             andalso maps:get(mem, Pace(Rate, latency)) < 16 bsl 20}
            || Rate <- maps:get(rates, Opts, [100000, 1000000])],
    io:format("~n  targets:~n"),
    [io:format("  ~-62s ~8.2f  ~s~n", [Name, float(V), case Ok of true -> "ok"; false -> "MISSED" end])
     || {Name, V, Ok} <- Checks],
    ok.

label(none) -> "untraced";
label(empty_trace) -> "empty NIF tracer, enabled answers trace";
label(ring_none) -> "tracekit_ring, payload none";
label(ring_full) -> "tracekit_ring, payload full";
label(latency) -> "tracekit_latency";
label(process) -> "process tracer pairing into a histogram";
label(xprof) -> "tracer process + a process per function (xprof)".

shuffle(L) ->
    [X || {_, X} <- lists:sort([{rand:uniform(), X} || X <- L])].

median(L) ->
    lists:nth((length(L) + 1) div 2, lists:sort(L)).

%%% Cost per call ---------------------------------------------------------------------

%% {ns, cpu ns} per call of f/1 (its call and return traced) under tracer
%% T: the traced process's wall time, and the CPU time of all the VM's
%% threads from the start of the calls until the tracer has counted them.
once(T) ->
    Self = self(),
    Worker = spawn(fun() ->
                           receive go -> ok end,
                           loop(1000),
                           T0 = erlang:monotonic_time(nanosecond),
                           loop(?CALLS),
                           T1 = erlang:monotonic_time(nanosecond),
                           Self ! {done, self(), T1 - T0}
                   end),
    Stop = start(T, [Worker]),
    garbage_collect(),
    Cpu0 = cpu_ns(),
    Worker ! go,
    Ns = receive {done, Worker, D} -> D end,
    _ = Stop(),
    Cpu1 = cpu_ns(),
    {Ns / ?CALLS, (Cpu1 - Cpu0) / ?CALLS}.

%% CPU time of every thread of the VM so far (ns; Linux).
cpu_ns() ->
    case file:list_dir("/proc/self/task") of
        {ok, Tasks} ->
            lists:sum([case file:read_file("/proc/self/task/" ++ T ++ "/schedstat") of
                           {ok, B} -> binary_to_integer(hd(binary:split(B, <<" ">>)));
                           _ -> 0
                       end || T <- Tasks]);
        _ ->
            0
    end.

loop(0) -> ok;
loop(N) -> _ = ?MODULE:f(N), loop(N - 1).

%% Starts tracer T on Procs, with the function pattern; returns the fun
%% that stops it (and says what it measured and dropped).
start(none, _Procs) ->
    fun() -> #{measured => 0, dropped => 0, queue => 0} end;
start(T, Procs) ->
    {Tracer, Flags, Finish, _} = tracer(T),
    S = trace:session_create(latency_bench, Tracer, []),
    [1 = trace:process(S, P, true, [call | Flags]) || P <- Procs],
    1 = trace:function(S, {?MODULE, f, 1}, [{'_', [], [{exception_trace}]}], [local]),
    fun() -> trace:session_destroy(S), Finish() end.

%% {Tracer, more process flags, fun ending it => counts, the processes
%% whose queues hold the events}.
tracer(empty_trace) ->
    {{tk_bench_tracer, trace}, [], fun() -> #{measured => 0, dropped => 0, queue => 0} end, []};
tracer(ring_none) ->
    ring(#{payload => none, policy => overwrite});
tracer(ring_full) ->
    ring(#{policy => overwrite});
tracer(latency) ->
    {ok, L} = tracekit_latency:new(#{}),
    {{tracekit_latency, L}, [procs],
     fun() ->
             ok = tracekit_latency:close(L),
             #{measured := M, dropped := D} = tracekit_latency:stats(L),
             #{measured => M, dropped => D, queue => 0}
     end, []};
tracer(process) ->
    P = spawn(fun() -> pairing(#{}, #{}) end),
    {P, [monotonic_timestamp], fun() -> finish_process([P], P) end, [P]};
tracer(xprof) ->
    Tab = ets:new(xprof_hist, [public, {write_concurrency, true}]),
    Handler = spawn(fun() -> handler(Tab, #{}) end),
    Tracer = spawn(fun() -> dispatcher(#{{?MODULE, f, 1} => Handler}) end),
    {Tracer, [monotonic_timestamp],
     fun() ->
             R = finish_process([Tracer, Handler], Handler),
             ets:delete(Tab),
             R
     end, [Tracer, Handler]}.

ring(Opts) ->
    {ok, R} = tracekit_ring:new(Opts),
    {{tracekit_ring, R}, [],
     fun() ->
             _ = tracekit_ring:drain(R),
             ok = tracekit_ring:close(R),
             #{measured => 0, dropped => 0, queue => 0}
     end, []}.

%% The references' processes are emptied (not timed), asked how many
%% durations they counted, and ended.
finish_process(Procs, Counter) ->
    wait_empty(Procs),
    Counter ! {count, self()},
    N = receive {count, Counter, C} -> C after 60000 -> -1 end,
    [exit(P, kill) || P <- Procs],
    #{measured => N, dropped => 0, queue => 0}.

wait_empty(Procs) ->
    case lists:all(fun(P) -> process_info(P, message_queue_len) =:= {message_queue_len, 0} end,
                   Procs) of
        true -> ok;
        false -> timer:sleep(10), wait_empty(Procs)
    end.

%% The process tracer: per process the open calls (a stack of call
%% times), per function a histogram (log-linear buckets, 64 per octave,
%% as a map), and the number of durations counted.
pairing(Open, Hists) ->
    receive
        {trace_ts, P, call, {M, F, Args}, Ts} ->
            pairing(Open#{P => [{{M, F, length(Args)}, Ts} | maps:get(P, Open, [])]}, Hists);
        {trace_ts, P, Tag, MFA, _, Ts} when Tag =:= return_from; Tag =:= exception_from ->
            case maps:get(P, Open, []) of
                [{MFA, T0} | Rest] ->
                    H = maps:get(MFA, Hists, #{}),
                    B = bucket(Ts - T0),
                    pairing(Open#{P => Rest},
                            Hists#{MFA => H#{B => maps:get(B, H, 0) + 1,
                                             n => maps:get(n, H, 0) + 1}});
                _ ->
                    pairing(Open, Hists)
            end;
        {count, From} ->
            From ! {count, self(), lists:sum([N || #{n := N} <- maps:values(Hists)])},
            pairing(Open, Hists);
        _ ->
            pairing(Open, Hists)
    end.

bucket(D) when D < 128 -> D;
bucket(D) ->
    K = bits(D, 0) - 1,
    {K, (D bsr (K - 6)) band 63}.

bits(0, N) -> N;
bits(D, N) -> bits(D bsr 1, N + 1).

%% xprof's tracer process: every message handed to the function's handler.
dispatcher(Handlers) ->
    receive
        {trace_ts, P, call, {M, F, Args}, Ts} ->
            maps:get({M, F, length(Args)}, Handlers) ! {call, P, Ts},
            dispatcher(Handlers);
        {trace_ts, P, Tag, MFA, _, Ts} when Tag =:= return_from; Tag =:= exception_from ->
            maps:get(MFA, Handlers) ! {return, P, Ts},
            dispatcher(Handlers);
        _ ->
            dispatcher(Handlers)
    end.

%% A function's handler: the open calls per process, the histogram in ETS.
handler(Tab, Open) ->
    receive
        {call, P, Ts} ->
            handler(Tab, Open#{P => [Ts | maps:get(P, Open, [])]});
        {return, P, Ts} ->
            case maps:get(P, Open, []) of
                [T0 | Rest] ->
                    _ = ets:update_counter(Tab, bucket(Ts - T0), 1, {bucket(Ts - T0), 0}),
                    _ = ets:update_counter(Tab, n, 1, {n, 0}),
                    handler(Tab, Open#{P => Rest});
                [] ->
                    handler(Tab, Open)
            end;
        {count, From} ->
            From ! {count, self(), case ets:lookup(Tab, n) of [{n, N}] -> N; [] -> 0 end},
            handler(Tab, Open)
    end.

%%% At a fixed pace ---------------------------------------------------------------

%% Two processes call f/1 at Rate calls/s in all for PACE_MS; the VM's
%% memory and the receiving processes' queues are sampled every 20 ms.
paced(Rate, T) ->
    Self = self(),
    Until = erlang:monotonic_time(millisecond) + ?PACE_MS,
    Callers = [spawn(fun() -> receive go -> ok end,
                              Self ! {made, self(), pace(Rate div 2, Until, 0)}
                     end) || _ <- [1, 2]],
    {Tracer, Flags, Finish, Queues} = tracer(T),
    S = trace:session_create(latency_pace, Tracer, []),
    [1 = trace:process(S, P, true, [call | Flags]) || P <- Callers],
    1 = trace:function(S, {?MODULE, f, 1}, [{'_', [], [{exception_trace}]}], [local]),
    %% (After the tracer is made: what grows while it traces.)
    garbage_collect(),
    M0 = erlang:memory(total),
    [P ! go || P <- Callers],
    {Peak, MaxQ} = sample(M0, M0, 0, Queues, Until),
    Made = lists:sum([receive {made, P, N} -> N end || P <- Callers]),
    trace:session_destroy(S),
    R = Finish(),
    {Rate, T, R#{made => Made * 1000 div ?PACE_MS, mem => Peak - M0, queue => MaxQ}}.

sample(M0, Peak, MaxQ, Queues, Until) ->
    M = erlang:memory(total),
    Q = lists:sum([N || P <- Queues, {message_queue_len, N} <- [process_info(P, message_queue_len)]]),
    case erlang:monotonic_time(millisecond) >= Until orelse M - M0 > 2 bsl 30 of
        true -> {max(Peak, M), max(MaxQ, Q)};
        false -> timer:sleep(20), sample(M0, max(Peak, M), max(MaxQ, Q), Queues, Until)
    end.

%% PerSec calls a second, in batches every millisecond; the calls made.
pace(PerSec, Until, Made) ->
    Now = erlang:monotonic_time(millisecond),
    case Now >= Until of
        true -> Made;
        false ->
            Batch = max(1, PerSec div 1000),
            loop(Batch),
            wait_until(Now + 1),
            pace(PerSec, Until, Made + Batch)
    end.

wait_until(T) ->
    case erlang:monotonic_time(millisecond) >= T of
        true -> ok;
        false -> erlang:yield(), wait_until(T)
    end.
