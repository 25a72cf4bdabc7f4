%% tracekit:slow/2 used as a hostile or careless user would: a directory
%% given as a binary, a directory used twice or by two traces at once, a
%% spec on a function tracekit's own processes call, a stop right after
%% the slow calls ended, a call that loses an event to a full ring, a
%% call holding messages that are small outside and large inside.
-module(tracekit_slow_hostile_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_testcase/2, end_per_testcase/2]).
-export([dir_as_binary/1, dir_used_twice/1, two_traces_one_dir/1, own_work_untraced/1,
         stop_keeps_ended_calls/1, lost_event_does_not_blind/1, held_memory_bounded/1,
         given_timestamps_hostile/1]).
-export([work/1, rec/2, nils/1]).

suite() ->
    [{timetrap, {minutes, 2}}].

all() ->
    [dir_as_binary, dir_used_twice, two_traces_one_dir, own_work_untraced,
     stop_keeps_ended_calls, lost_event_does_not_blind, held_memory_bounded,
     given_timestamps_hostile].

init_per_testcase(Case, Config) ->
    Dir = filename:join(?config(priv_dir, Config), Case),
    ok = file:make_dir(Dir),
    [{dir, Dir} | Config].

end_per_testcase(_, _Config) ->
    ok = tracekit:stop(),
    ok.

%%% The traced functions ------------------------------------------------------------

work(Ms) -> timer:sleep(Ms), ok.

rec(0, Ms) -> timer:sleep(Ms), 0;
rec(N, Ms) -> 1 + ?MODULE:rec(N - 1, Ms).

%% Sends itself 40 lists of 10,000 [] (10 kB outside, 160 kB on the
%% heap each), then waits for ever (the call never ends).
nils(Parent) ->
    [begin self() ! get(nils), receive L when is_list(L) -> ok end end
     || _ <- lists:seq(1, 40)],
    Parent ! {nils, self()},
    receive stop -> ok end.

%%% Helpers ------------------------------------------------------------------------

calls(N, Ms) ->
    Self = self(),
    Ps = [spawn(fun() -> ?MODULE:work(Ms), Self ! {done, self()} end) || _ <- lists:seq(1, N)],
    [receive {done, P} -> ok after 10000 -> error(worker_timeout) end || P <- Ps],
    ok.

stop(T) ->
    {ok, S} = tracekit:stop(T),
    ct:log("~p", [S]),
    S.

%%% Cases ----------------------------------------------------------------------------

%% dir => a binary (a file:filename_all() as the spec allows): the trace
%% keeps the call, it does not crash on the file name.
dir_as_binary(Config) ->
    Dir = list_to_binary(?config(dir, Config)),
    {ok, T} = tracekit:slow({?MODULE, work, 1}, #{dir => Dir, over => {1, ms}, print => false}),
    Mon = monitor(process, T),
    calls(1, 5),
    timer:sleep(500),
    receive {'DOWN', Mon, process, T, Why} -> ct:fail({trace_crashed, Why}) after 0 -> ok end,
    #{captures := [#{file := _}]} = stop(T).

%% A second trace into a directory a first one wrote: the first one's
%% files are still there, as they were.
dir_used_twice(Config) ->
    Dir = ?config(dir, Config),
    {ok, T1} = tracekit:slow({?MODULE, work, 1}, #{dir => Dir, over => {1, ms}, print => false}),
    calls(1, 5),
    #{captures := [#{file := F1}]} = stop(T1),
    {ok, B1} = file:read_file(F1),
    Before = erlang:md5(B1),
    {ok, T2} = tracekit:slow({?MODULE, work, 1}, #{dir => Dir, over => {1, ms}, print => false}),
    calls(1, 5),
    #{captures := [#{file := F2}]} = stop(T2),
    {ok, A1} = file:read_file(F1),
    ?assertEqual(Before, erlang:md5(A1)),
    ?assertNotEqual(F1, F2).

%% Two traces at once into one directory: each kept call has a file of
%% its own.
two_traces_one_dir(Config) ->
    Dir = ?config(dir, Config),
    Opts = #{dir => Dir, over => {1, ms}, print => false},
    {ok, T1} = tracekit:slow({?MODULE, work, 1}, Opts),
    {ok, T2} = tracekit:slow({?MODULE, work, 1}, Opts),
    calls(1, 5),
    timer:sleep(500),
    #{captures := C1} = stop(T1),
    #{captures := C2} = stop(T2),
    Files = [F || #{file := F} <- C1 ++ C2],
    ?assertEqual(2, length(Files)),
    ?assertEqual(2, length(lists:usort(Files))).

%% A spec on a function tracekit's own processes call (erlang:monitor/2,
%% which the process that writes a kept call's page starts with): no
%% kept call is one of tracekit's own, and one call makes one capture,
%% not a loop of them.
own_work_untraced(Config) ->
    {ok, T} = tracekit:slow("erlang:monitor/2", #{dir => ?config(dir, Config), over => {0, us},
                                                  max_captures => 200, print => false,
                                                  max_time => infinity}),
    spawn(fun() -> erlang:monitor(process, self()) end),
    timer:sleep(2000),
    #{captures := Kept} = stop(T),
    %% (This process's own monitor of the trace, in tracekit:stop/1, is
    %% this process's call.)
    Self = self(),
    Own = [C || #{file := F, pid := Pid} = C <- Kept, Pid =/= Self,
                {ok, [{trace_ts, _, call, {erlang, monitor, [process, P]}, _, _} | _]}
                    <- [tracekit_file:read(F)], P =:= T],
    ?assertEqual([], Own).

%% Twenty calls over the threshold, all ended before the stop, printed
%% at a shell that takes 60 ms a line (a remote shell far away): the stop
%% comes while the trace prints the first of them, and all twenty are
%% still kept (not let go as unfinished).
stop_keeps_ended_calls(Config) ->
    Dir = ?config(dir, Config),
    Io = spawn_link(fun() -> slow_io(60) end),
    {ok, T} = tracekit:slow({?MODULE, work, 1}, #{dir => Dir, over => {1, ms}, io => Io,
                                                  max_captures => 100}),
    calls(20, 5),
    First = filename:join([Dir, "*", "slow-1.html"]),
    wait_for(fun() -> filelib:wildcard(First) =/= [] end, 10000),
    {ok, _} = tracekit:stop(T),
    Kept = filelib:wildcard(filename:join([Dir, "*", "slow-*.tkt"])),
    ?assertEqual(20, length(Kept)).

%% An io device that answers each request after Ms.
slow_io(Ms) ->
    receive
        {io_request, From, Ref, _} ->
            timer:sleep(Ms),
            From ! {io_reply, Ref, ok},
            slow_io(Ms)
    end.

wait_for(F, Ms) when Ms > 0 ->
    case F() of
        true -> ok;
        false -> timer:sleep(1), wait_for(F, Ms - 1)
    end.

%% A call that loses events to a full ring (a recursion of 50,000 with a
%% 1 MiB ring): the calls the process makes afterwards are still seen and
%% kept.
lost_event_does_not_blind(Config) ->
    {ok, T} = tracekit:slow({?MODULE, rec, 2}, #{dir => ?config(dir, Config), over => {1, ms},
                                                 max_captures => 100, print => false}),
    Self = self(),
    P = spawn(fun() ->
                      ?MODULE:rec(50000, 0),
                      receive go -> ok end,
                      [?MODULE:rec(1, 5) || _ <- lists:seq(1, 3)],
                      Self ! {done, self()}
              end),
    timer:sleep(2000),
    P ! go,
    receive {done, P} -> ok end,
    timer:sleep(1000),
    #{captures := Kept, dropped := Dropped} = stop(T),
    ?assert(Dropped > 0),
    Small = [K || #{file := F} = K <- Kept,
                  {ok, [{trace_ts, _, call, {?MODULE, rec, [1, 5]}, _, _} | _]} <- [tracekit_file:read(F)]],
    ?assertEqual(3, length(Small)).

%% A call that never ends, holding messages that take 16 times more room
%% on the heap than their external size (80 events: 800 kB outside,
%% 12.8 MB on the heap): what the trace holds for it stays near max_bytes
%% (1 MiB), not 16 times as much.
held_memory_bounded(Config) ->
    {ok, T} = tracekit:slow({?MODULE, nils, 1}, #{dir => ?config(dir, Config),
                                                  max_bytes => 1 bsl 20, ring_size => 16 bsl 20,
                                                  max_time => infinity,
                                                  print => false}),
    Self = self(),
    P = spawn(fun() -> put(nils, lists:duplicate(10000, [])), ?MODULE:nils(Self) end),
    receive {nils, P} -> ok end,
    %% Measured once the trace has taken in every event (none is on its
    %% way any more), the call still open.
    timer:sleep(2000),
    erlang:garbage_collect(T),
    {memory, Mem} = process_info(T, memory),
    exit(P, kill),
    ct:log("the trace process: ~w bytes", [Mem]),
    %% (The call is unfinished: what it left out is in no counter.)
    #{counters := #{unfinished := 1}, dropped := 0} = stop(T),
    ?assert(Mem < 4 bsl 20).

%% The recording tracers' callbacks with timestamps of every shape in
%% Opts (huge, negative, floats, bignums, deep, kinds mixed, future and
%% past): every call returns ok, the ring drains every event with a trace
%% tag, the file reads back and tracekit-cat reads it, and the times
%% tracekit-cat prints never go back.
given_timestamps_hostile(Config) ->
    rand:seed(exsss, {7, 7, 7}),
    Tags = [send, 'receive', call, return_from, exception_from, return_to, in, out,
            gc_minor_start, spawn, exit, link],
    {ok, R} = tracekit_ring:new(#{}),
    [ok = tracekit_ring:trace(pick(Tags), R, self(), I, hostile_opts()) || I <- lists:seq(1, 3000)],
    ?assertEqual(3000, length(tracekit_ring:drain(R))),
    tracekit_ring:close(R),
    File = filename:join(?config(dir, Config), "hostile.tkt"),
    {ok, F} = tracekit_file:new(#{path => File}),
    [ok = tracekit_file:trace(pick(Tags), F, self(), I, hostile_opts()) || I <- lists:seq(1, 3000)],
    ok = tracekit_file:close(F),
    {ok, Read} = tracekit_file:read(File),
    ?assertEqual(lists:seq(1, 3000), [element(4, E) || E <- Read]),
    Cat = os:cmd(filename:join(code:priv_dir(tracekit), "bin/tracekit-cat") ++ " " ++ File
                 ++ "; echo rc=$?"),
    Lines = string:split(string:trim(Cat), "\n", all),
    ?assertEqual("rc=0", lists:last(Lines)),
    Times = [T || L <- Lines, [T | _] <- [string:split(L, " ")], length(T) =:= 27],
    ?assertEqual(3000, length(Times)),
    ?assertEqual(Times, lists:sort(Times)).

pick(L) -> lists:nth(rand:uniform(length(L)), L).

hostile_opts() ->
    Ints = [0, 1, -1, (1 bsl 32) - 1, (1 bsl 63) - 1, 1 bsl 63, (1 bsl 64) - 1, 1 bsl 64,
            -(1 bsl 63), 1 bsl 1000, erlang:system_time(microsecond), erlang:monotonic_time(),
            1.0, -0.0, 1.0e300],
    Kinds = [timestamp, monotonic, strict_monotonic, cpu_timestamp, nope, 1],
    Us = erlang:system_time(microsecond) + rand:uniform(1 bsl 40) - (1 bsl 39),
    Ts = case rand:uniform(7) of
             1 -> {pick(Kinds), pick(Ints)};
             2 -> {pick(Kinds), {pick(Ints), pick(Ints)}};
             3 -> {pick(Kinds), {pick(Ints), pick(Ints), pick(Ints)}};
             4 -> pick(Kinds);
             5 -> {pick(Kinds), lists:foldl(fun(_, A) -> {A} end, x, lists:seq(1, 10000))};
             6 -> {timestamp, {Us div 1000000000000, Us div 1000000 rem 1000000, Us rem 1000000}};
             7 -> {pick([monotonic, strict_monotonic]),
                   case rand:uniform(2) of
                       1 -> erlang:monotonic_time() + rand:uniform(1 bsl 62) - (1 bsl 61);
                       2 -> {erlang:monotonic_time() - rand:uniform(1 bsl 40), 1}
                   end}
         end,
    maps:from_list([{timestamp, Ts} | [KV || KV <- [{extra, self()}, {scheduler_id, pick(Ints)},
                                                    {match_spec_result, pick([true, x])}],
                                             rand:uniform(2) =:= 1]]).
