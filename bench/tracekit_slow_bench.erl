%% @doc `make bench', slow calls: what {@link tracekit:slow/2} costs while
%% it runs, side by side in one VM run.
%%
%% 1. A fast call of the spec (req/1, which makes one nested call and
%%    returns at once, far under the threshold): the calling process's wall
%%    time per call, and the CPU time of every thread of the VM per call
%%    until the trace has let every call go; untraced, under
%%    tracekit:slow/2, and under tracekit:latency/2 of the same function
%%    for comparison.
%% 2. A process that never calls the spec, making calls of its own while
%%    tracekit:slow/2 runs: with `processes => all' (it has the call and
%%    silent flags: the VM checks at each of its calls, a pattern being on
%%    every function) and with `processes' naming another process (it has
%%    no flags; the patterns alone).
%% Each configuration runs once in each of REPS repetitions, in a new
%% random order each time; medians.
-module(tracekit_slow_bench).

-export([main/0, main/1, req/1, work/1]).

-define(REPS, 9).
-define(CALLS, 100000).
-define(CONFIGS, [none, slow, latency, bystander_none, bystander_all, bystander_outside]).

%% @private The spec's function, and the call it makes.
req(X) -> ?MODULE:work(X) + 1.

%% @private
work(X) -> X * 2.

main() ->
    main(#{}).

main(Opts) ->
    Reps = maps:get(reps, Opts, ?REPS),
    {ok, Dir} = tracekit_private:dir(tracekit_private:temp_dir(), "tracekit-slow-bench-"),
    io:format("~nslow calls: what tracekit:slow/2 costs while it runs (~p reps, medians)~n",
              [Reps]),
    Rounds = [[{C, once(C, Dir)} || C <- tracekit_latency_bench:shuffle(?CONFIGS)]
              || _ <- lists:seq(1, Reps)],
    tracekit_private:delete_dir(Dir),
    Runs = maps:groups_from_list(fun({C, _}) -> C end, fun({_, V}) -> V end,
                                 lists:append(Rounds)),
    W = maps:map(fun(_, L) -> tracekit_latency_bench:median([X || {X, _} <- L]) end, Runs),
    Cpu = maps:map(fun(_, L) -> tracekit_latency_bench:median([X || {_, X} <- L]) end, Runs),
    io:format("  (ns/call: the calling process's wall time; cpu/call: every thread of the VM,\n"
              "   until the trace has taken every call in)~n"),
    io:format("  ~-58s ~9s ~9s ~9s ~9s~n", ["", "ns/call", "x", "cpu/call", "x"]),
    Line = fun(C, Base) ->
                   io:format("  ~-58s ~9.1f ~9.2f ~9.1f ~9.2f~n",
                             [label(C), maps:get(C, W), maps:get(C, W) / maps:get(Base, W),
                              maps:get(C, Cpu), maps:get(C, Cpu) / maps:get(Base, Cpu)])
           end,
    [Line(C, none) || C <- [none, slow, latency]],
    [Line(C, bystander_none) || C <- [bystander_none, bystander_all, bystander_outside]],
    ok.

label(none) -> "a fast call of the spec (req/1 and its call), untraced";
label(slow) -> "  the same under tracekit:slow (let go)";
label(latency) -> "  the same under tracekit:latency";
label(bystander_none) -> "a process that never calls the spec, untraced";
label(bystander_all) -> "  the same under tracekit:slow, processes => all";
label(bystander_outside) -> "  the same under tracekit:slow, not in processes".

%% {ns, cpu ns} per call under configuration C.
once(C, Dir) ->
    Self = self(),
    Fun = case C of
              none -> fun req/1;
              slow -> fun req/1;
              latency -> fun req/1;
              _ -> fun work/1
          end,
    Worker = spawn(fun() ->
                           receive go -> ok end,
                           loop(Fun, 1000),
                           T0 = erlang:monotonic_time(nanosecond),
                           loop(Fun, ?CALLS),
                           T1 = erlang:monotonic_time(nanosecond),
                           Self ! {done, self(), T1 - T0}
                   end),
    Other = spawn(fun() -> receive stop -> ok end end),
    Stop = start(C, Dir, Other),
    garbage_collect(),
    Cpu0 = tracekit_latency_bench:cpu_ns(),
    Worker ! go,
    Ns = receive {done, Worker, D} -> D end,
    ok = Stop(),
    Cpu1 = tracekit_latency_bench:cpu_ns(),
    Other ! stop,
    {Ns / ?CALLS, (Cpu1 - Cpu0) / ?CALLS}.

loop(_F, 0) -> ok;
loop(F, N) -> _ = F(N), loop(F, N - 1).

start(C, _Dir, _Other) when C =:= none; C =:= bystander_none ->
    fun() -> ok end;
start(latency, _Dir, _Other) ->
    {ok, T} = tracekit:latency({?MODULE, req, 1}, #{print => false, max_time => infinity}),
    fun() -> {ok, _} = tracekit:stop(T), ok end;
start(C, Dir, Other) ->
    Procs = case C of bystander_outside -> [Other]; _ -> all end,
    {ok, T} = tracekit:slow({?MODULE, req, 1}, #{print => false, max_time => infinity,
                                                 over => {1, s}, dir => Dir,
                                                 processes => Procs}),
    fun() ->
            {ok, #{counters := #{kept := 0}}} = tracekit:stop(T),
            ok
    end.
