%% tracekit_record_bench: what an event takes in a ring, in figures that do
%% not move with the machine's load: bytes of ring per event, events a
%% 1 MiB ring holds before it is full, and whether the largest term of
%% OTP's seq_trace suite (its `port' case) passes whole through a ring of
%% default settings. Run in a VM of one scheduler (scripts/bench), so that
%% one ring holds every event.
-module(tracekit_record_bench).

-export([main/0, huge_data/0, work/1]).

-define(N, 2000).

main() ->
    io:format("~nRecords (one scheduler; bytes of ring per event, events a 1 MiB "
              "drop ring holds):~n", []),
    io:format("  ~-28s ~10s ~12s~n", ["workload", "bytes/ev", "held in 1MiB"]),
    [row(Name, W) || {Name, W} <- [{"send {req, Pid, I}", fun send_workload/2},
                                   {"call + return_from, ts", fun call_workload/2}]],
    Huge = huge_data(),
    io:format("  seq_trace port term: ~w bytes of external format; ~s~n",
              [byte_size(term_to_binary(Huge)), huge_result(Huge)]),
    ok.

row(Name, W) ->
    {ok, R} = tracekit_ring:new(#{size => 1 bsl 20, policy => overwrite}),
    W(R, ?N),
    #{written := Wr, bytes := B} = tracekit_ring:stats(R),
    tracekit_ring:close(R),
    {ok, D} = tracekit_ring:new(#{size => 1 bsl 20, policy => drop}),
    W(D, 200000),
    #{written := Held, dropped := Dropped} = tracekit_ring:stats(D),
    tracekit_ring:close(D),
    io:format("  ~-28s ~10.1f ~12w~s~n",
              [Name, B / max(Wr, 1), Held, [" (never full)" || Dropped =:= 0]]).

%% A traced process sends {req, self(), I} to a sink, N times.
send_workload(R, N) ->
    Sink = spawn(fun Loop() -> receive stop -> ok; _ -> Loop() end end),
    S = trace:session_create(tk_record_bench, {tracekit_ring, R}, []),
    P = spawn(fun() -> receive go -> ok end,
                       [Sink ! {req, self(), I} || I <- lists:seq(1, N)],
                       receive stop -> ok end end),
    1 = trace:process(S, P, true, [send]),
    P ! go,
    wait_written(R, N),
    trace:session_destroy(S),
    P ! stop,
    Sink ! stop.

%% A traced process calls a function N times; call and return_from, with
%% timestamps (the process tracer's default kind).
call_workload(R, N) ->
    S = trace:session_create(tk_record_bench, {tracekit_ring, R}, []),
    _ = trace:function(S, {?MODULE, work, 1}, [{'_', [], [{return_trace}]}], [local]),
    P = spawn(fun() -> receive go -> ok end,
                       [work(I) || I <- lists:seq(1, N)],
                       receive stop -> ok end end),
    1 = trace:process(S, P, true, [call, timestamp]),
    P ! go,
    wait_written(R, 2 * N),
    trace:session_destroy(S),
    P ! stop.

work(I) -> {ok, I}.

wait_written(R, N) ->
    wait_written(R, N, 2000).
wait_written(_, _, 0) ->
    ok;
wait_written(R, N, Tries) ->
    #{written := W, dropped := D} = tracekit_ring:stats(R),
    case W + D >= N of
        true -> ok;
        false -> timer:sleep(5), wait_written(R, N, Tries - 1)
    end.

%% The term of OTP's seq_trace suite's `port' case (lists sharing their
%% halves: 196,609 bytes of external format), sent by a traced process.
huge_data() -> huge_data(16384).
huge_data(0) -> [];
huge_data(N) when N rem 2 == 0 ->
    P = huge_data(N div 2),
    [P | P];
huge_data(N) ->
    P = huge_data(N div 2),
    [16#1234566, P | P].

huge_result(Huge) ->
    {ok, R} = tracekit_ring:new(),
    S = trace:session_create(tk_record_bench, {tracekit_ring, R}, []),
    Sink = spawn(fun() -> receive _ -> ok end end),
    P = spawn(fun() -> receive go -> Sink ! Huge end, receive stop -> ok end end),
    1 = trace:process(S, P, true, [send]),
    P ! go,
    wait_written(R, 1),
    trace:session_destroy(S),
    P ! stop,
    #{bytes := B, truncated := T} = tracekit_ring:stats(R),
    Evs = tracekit_ring:drain(R),
    tracekit_ring:close(R),
    Whole = [ok || {trace, _, send, M, _} <- Evs, M =:= Huge] =:= [ok],
    io_lib:format("~w bytes of ring, truncated ~w, drained whole: ~w", [B, T, Whole]).
