%% tracekit_ring on a real VM: lifecycle (close, session destroy, handles
%% garbage collected while traced processes run), many consumers, many
%% producers, exact drop accounting, and states that are not rings.
-module(tracekit_ring_life_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, init_per_testcase/2, end_per_testcase/2]).
-export([close_during_tracing/1, destroy_session_during_tracing/1,
         session_handle_collected/1, ring_handle_collected/1,
         drain_from_many_processes/1,
         drain_from_many_processes_dropping/1, order_per_tracee_across_schedulers/1,
         drop_accounting_is_exact/1, overwrite_keeps_newest/1,
         not_a_ring_as_state/1, legacy_and_seq_tracer_apis/1,
         set_takes_effect_on_every_thread/1, set_sample/1]).

all() ->
    [close_during_tracing, destroy_session_during_tracing,
     session_handle_collected, ring_handle_collected,
     drain_from_many_processes, drain_from_many_processes_dropping,
     order_per_tracee_across_schedulers,
     drop_accounting_is_exact, overwrite_keeps_newest, not_a_ring_as_state,
     legacy_and_seq_tracer_apis, set_takes_effect_on_every_thread, set_sample].

init_per_testcase(_, Config) ->
    Config.

end_per_testcase(_, _) ->
    _ = seq_trace:set_system_tracer(false),
    ok.

%% N processes sending to themselves as fast as they can until told to stop.
senders(N) ->
    [spawn(fun() -> send_loop(0) end) || _ <- lists:seq(1, N)].

send_loop(I) ->
    self() ! {tick, I},
    receive
        stop -> ok;
        {tick, I} -> send_loop(I + 1)
    end.

stop(Pids) ->
    [P ! stop || P <- Pids],
    tk_collector:wait_dead(Pids).

close_during_tracing(_Config) ->
    {ok, R} = tracekit_ring:new(#{size => 65536}),
    S = trace:session_create(close_during, {tracekit_ring, R}, []),
    Ps = senders(8),
    [1 = trace:process(S, P, true, [send, 'receive']) || P <- Ps],
    timer:sleep(100),
    ok = tracekit_ring:close(R),
    %% Each process loses the tracer when the VM next asks trace_status
    %% (on schedule-in): soon, as they keep running.
    tk_collector:eventually(fun() -> [{flags, []}] =:= lists:usort([trace:info(S, P, flags) || P <- Ps]) end),
    #{written := W1} = tracekit_ring:stats(R),
    timer:sleep(50),
    #{written := W2, closed := true} = tracekit_ring:stats(R),
    ?assertEqual(W1, W2),
    %% What was recorded before the close can still be drained.
    Evs = tracekit_ring:drain(R),
    ?assert(length(Evs) > 100),
    stop(Ps),
    trace:session_destroy(S).

destroy_session_during_tracing(_Config) ->
    {ok, R} = tracekit_ring:new(#{size => 65536}),
    S = trace:session_create(destroy_during, {tracekit_ring, R}, []),
    Ps = senders(8),
    [1 = trace:process(S, P, true, [send, 'receive', running]) || P <- Ps],
    Drainer = spawn_link(fun Loop() -> _ = tracekit_ring:drain(R), Loop() end),
    timer:sleep(100),
    true = trace:session_destroy(S),
    %% The VM strips the session from its processes asynchronously: wait
    %% until nothing more is recorded, then check that it stays so.
    tk_collector:eventually(fun() ->
                       #{written := A} = tracekit_ring:stats(R),
                       timer:sleep(20),
                       #{written := B} = tracekit_ring:stats(R),
                       A =:= B
               end),
    #{written := W1} = tracekit_ring:stats(R),
    timer:sleep(100),
    ?assertMatch(#{written := W1}, tracekit_ring:stats(R)),
    unlink(Drainer),
    exit(Drainer, kill),
    stop(Ps).

%% The only reference to the session is dropped while its processes run:
%% the VM destroys the session, and the ring is freed once nothing refers
%% to it.
session_handle_collected(_Config) ->
    Alive0 = tracekit_ring:alive(),
    Ps = senders(4),
    Self = self(),
    Owner = spawn(fun() ->
                          {ok, R} = tracekit_ring:new(#{size => 65536}),
                          S = trace:session_create(collected, {tracekit_ring, R}, []),
                          [1 = trace:process(S, P, true, [send, 'receive', procs]) || P <- Ps],
                          Self ! traced,
                          receive drop -> ok end
                  end),
    receive traced -> ok end,
    ?assertEqual(Alive0 + 1, tracekit_ring:alive()),
    timer:sleep(100),
    Owner ! drop,
    tk_collector:wait_dead([Owner]),
    %% The session's handle is gone with the owner's heap; the VM notices
    %% when it collects, and the ring goes when its last reference does.
    tk_collector:eventually(fun() ->
                       [erlang:garbage_collect(P) || P <- processes()],
                       tracekit_ring:alive() =:= Alive0
               end),
    %% The traced processes never noticed.
    ?assert(lists:all(fun erlang:is_process_alive/1, Ps)),
    timer:sleep(50),
    ?assert(lists:all(fun erlang:is_process_alive/1, Ps)),
    stop(Ps).

%% With the legacy API the VM itself holds the ring: the handle can go, the
%% ring keeps recording, and it is freed when tracing stops.
ring_handle_collected(_Config) ->
    Alive0 = tracekit_ring:alive(),
    Ps = senders(4),
    Self = self(),
    Owner = spawn(fun() ->
                          {ok, R} = tracekit_ring:new(#{size => 65536}),
                          [1 = erlang:trace(P, true, [send, {tracer, tracekit_ring, R}]) || P <- Ps],
                          Self ! traced
                  end),
    receive traced -> ok end,
    tk_collector:wait_dead([Owner]),
    [erlang:garbage_collect(P) || P <- processes()],
    timer:sleep(100),
    ?assertEqual(Alive0 + 1, tracekit_ring:alive()),
    [1 = erlang:trace(P, false, [all]) || P <- Ps],
    tk_collector:eventually(fun() ->
                       [erlang:garbage_collect(P) || P <- processes()],
                       tracekit_ring:alive() =:= Alive0
               end),
    stop(Ps).

%% Eight consumers drain one ring while four producers record numbered
%% messages: every event reaches exactly one consumer, and each consumer
%% sees each producer's events in order.  The ring is large enough to hold
%% the whole run (80004 records of 72 bytes in 8 MiB per thread), so no
%% drop is possible however far the consumers fall behind.
drain_from_many_processes(_Config) ->
    N = 20000,
    {R, Ps, Parts, Rest} = many_drainers(#{size => 8 bsl 20}, N),
    All = [E || E = {trace, _, send, {seq, _}, _} <- lists:append(Parts) ++ Rest],
    %% Each producer's {done, Pid} send is recorded too.
    ?assertMatch(#{written := W, dropped := 0, drained := W} when W =:= 4 * N + 4,
                 tracekit_ring:stats(R)),
    ?assertEqual(4 * N, length(All)),
    ?assertEqual(4 * N, length(lists:usort([{element(2, E), element(4, E)} || E <- All]))),
    [?assertEqual(lists:sort(seqs(P, Evs)), seqs(P, Evs)) || Evs <- Parts, P <- Ps].

%% The same race with a ring far too small: most events are dropped, and
%% every event is either drained by exactly one consumer or counted as
%% dropped, never both, never neither.
drain_from_many_processes_dropping(_Config) ->
    N = 20000,
    {R, Ps, Parts, Rest} = many_drainers(#{size => 16384}, N),
    Drained = lists:append(Parts) ++ Rest,
    #{written := W, dropped := D, drained := W} = tracekit_ring:stats(R),
    ?assert(D > 0),
    ?assertEqual(4 * N + 4, W + D),
    ?assertEqual(W, length(Drained)),
    Keys = [{element(2, E), element(4, E)} || E <- Drained],
    ?assertEqual(W, length(lists:usort(Keys))),
    [?assertEqual(lists:sort(seqs(P, Evs)), seqs(P, Evs)) || Evs <- Parts, P <- Ps].

many_drainers(Opts, N) ->
    {ok, R} = tracekit_ring:new(Opts),
    S = trace:session_create(many_drainers, {tracekit_ring, R}, []),
    Self = self(),
    Ps = [spawn(fun() -> receive go -> ok end,
                         [self() ! {seq, I} || I <- lists:seq(1, N)],
                         Self ! {done, self()}
                end) || _ <- lists:seq(1, 4)],
    [1 = trace:process(S, P, true, [send]) || P <- Ps],
    Drainers = [spawn_link(fun() -> drainer(R, []) end) || _ <- lists:seq(1, 8)],
    [P ! go || P <- Ps],
    [receive {done, P} -> ok end || P <- Ps],
    [D ! {stop, self()} || D <- Drainers],
    Parts = [receive {drained, D, Evs} -> Evs end || D <- Drainers],
    Rest = tracekit_ring:drain(R),
    trace:session_destroy(S),
    {R, Ps, Parts, Rest}.

drainer(R, Acc) ->
    receive
        {stop, From} -> From ! {drained, self(), lists:append(lists:reverse(Acc))}
    after 0 ->
            drainer(R, [tracekit_ring:drain(R, 500) | Acc])
    end.

seqs(P, Evs) -> [I || {trace, Q, send, {seq, I}, _} <- Evs, Q =:= P].

%% Many processes spread over every scheduler (and moving between them):
%% each one's events come out in the order it sent them.
order_per_tracee_across_schedulers(_Config) ->
    %% Rings that hold the whole run (about 17 MB), so that nothing is
    %% dropped however the drainer is scheduled: this test is about order.
    {ok, R} = tracekit_ring:new(#{size => 32 bsl 20}),
    S = trace:session_create(order, {tracekit_ring, R}, []),
    N = 2000,
    Self = self(),
    Ps = [spawn(fun() -> receive go -> ok end,
                         [begin self() ! {seq, I}, receive {seq, I} -> ok end,
                                (I rem 100 =:= 0) andalso erlang:yield()
                          end || I <- lists:seq(1, N)],
                         Self ! {done, self()}
                end) || _ <- lists:seq(1, 64)],
    [1 = trace:process(S, P, true, [send, 'receive']) || P <- Ps],
    [P ! go || P <- Ps],
    %% Drain while they run, so that merging across rings is exercised.
    Evs = drain_until_done(R, Ps, []),
    Stats = tracekit_ring:stats(R),
    ct:log("events ~p, stats ~p", [length(Evs), Stats]),
    ?assertMatch(#{dropped := 0}, Stats),
    [begin
         Mine = [{Tag, I} || {trace, Q, Tag, {seq, I}, _} <- Evs, Q =:= P]
             ++ [],
         Sends = [I || {send, I} <- Mine],
         ?assertEqual(lists:seq(1, N), Sends)
     end || P <- Ps],
    %% Sends and receives interleave strictly per process.
    [begin
         Mine = [{element(3, E), element(2, element(4, E))}
                 || E <- Evs, element(2, E) =:= P, is_tuple(element(4, E)),
                    element(1, element(4, E)) =:= seq],
         Want = lists:append([[{send, I}, {'receive', I}] || I <- lists:seq(1, N)]),
         ?assertEqual(Want, Mine)
     end || P <- Ps],
    trace:session_destroy(S).

drain_until_done(R, [], Acc) ->
    lists:append(lists:reverse([tracekit_ring:drain(R) | Acc]));
drain_until_done(R, Ps, Acc) ->
    Chunk = tracekit_ring:drain(R),
    receive
        {done, P} -> drain_until_done(R, lists:delete(P, Ps), [Chunk | Acc])
    after 1 ->
            drain_until_done(R, Ps, [Chunk | Acc])
    end.

%% A small ring under load: what the VM offered = written + dropped, where
%% "offered" is counted independently by tracekit_count in a parallel
%% session, and the kept events are the oldest.
drop_accounting_is_exact(_Config) ->
    {ok, R} = tracekit_ring:new(#{size => 8192}),
    {ok, C} = tracekit_count:new(),
    S1 = trace:session_create(drop_ring, {tracekit_ring, R}, []),
    S2 = trace:session_create(drop_count, {tracekit_count, C}, []),
    N = 5000,
    W = spawn(fun() -> receive go -> [self() ! {n, I} || I <- lists:seq(1, N)] end end),
    [1 = trace:process(S, W, true, [send]) || S <- [S1, S2]],
    W ! go,
    tk_collector:wait_dead([W]),
    #{send := Offered} = tracekit_count:read(C),
    #{written := Written, dropped := Dropped} = tracekit_ring:stats(R),
    ct:log("offered ~p written ~p dropped ~p", [Offered, Written, Dropped]),
    ?assertEqual(N, Offered),
    ?assertEqual(Offered, Written + Dropped),
    ?assert(Dropped > 0),
    Kept = [I || {trace, _, send, {n, I}, _} <- tracekit_ring:drain(R)],
    ?assertEqual(lists:seq(1, Written), Kept),
    [trace:session_destroy(S) || S <- [S1, S2]].

overwrite_keeps_newest(_Config) ->
    {ok, R} = tracekit_ring:new(#{size => 8192, policy => overwrite}),
    S = trace:session_create(overwrite, {tracekit_ring, R}, []),
    N = 5000,
    W = spawn(fun() -> receive go -> [self() ! {n, I} || I <- lists:seq(1, N)] end end),
    1 = trace:process(S, W, true, [send]),
    W ! go,
    tk_collector:wait_dead([W]),
    #{written := N, overwritten := O, dropped := 0} = tracekit_ring:stats(R),
    Kept = [I || {trace, _, send, {n, I}, _} <- tracekit_ring:drain(R)],
    ?assertEqual(lists:seq(O + 1, N), Kept),
    trace:session_destroy(S).

%% Tracer states that are not rings: the VM survives, the tracer removes
%% itself, nothing is recorded anywhere.
not_a_ring_as_state(_Config) ->
    {ok, Closed} = tracekit_ring:new(),
    ok = tracekit_ring:close(Closed),
    {ok, Counter} = tracekit_count:new(),
    States = [foo, 42, "ring", <<"ring">>, make_ref(), self(), {tuple},
              Counter, Closed],
    [begin
         P = spawn(fun() -> send_loop(0) end),
         S = trace:session_create(bad_state, {tracekit_ring, State}, []),
         _ = trace:process(S, P, true, [send, 'receive', call, procs, running]),
         timer:sleep(20),
         ?assertEqual({flags, []}, trace:info(S, P, flags)),
         ?assert(is_process_alive(P)),
         trace:session_destroy(S),
         stop([P])
     end || State <- States],
    ?assertMatch(#{written := 0}, tracekit_ring:stats(Closed)).

%% The other two ways to use a tracer module.
legacy_and_seq_tracer_apis(_Config) ->
    {ok, R} = tracekit_ring:new(),
    P = spawn(fun() -> receive go -> self() ! hi, receive hi -> ok end end end),
    1 = erlang:trace(P, true, [send, {tracer, tracekit_ring, R}]),
    P ! go,
    tk_collector:wait_dead([P]),
    ?assertEqual([{trace, P, send, hi, P}], tracekit_ring:drain(R)),
    false = seq_trace:set_system_tracer({tracekit_ring, R}),
    Self = self(),
    seq_trace:set_token(label, 9),
    seq_trace:set_token(print, true),
    seq_trace:print(9, hello),
    seq_trace:set_token([]),
    ?assertEqual([{seq_trace, 9, {print, {0, 1}, Self, [], hello}}], tracekit_ring:drain(R)).

%% Senders on every scheduler; each set/2 holds for all of them as soon as
%% it returns.
set_takes_effect_on_every_thread(_Config) ->
    {ok, R} = tracekit_ring:new(#{size => 1 bsl 20, policy => overwrite}),
    S = trace:session_create(set_live, {tracekit_ring, R}, []),
    Ps = senders(4 * erlang:system_info(schedulers)),
    [1 = trace:process(S, P, true, [send, 'receive']) || P <- Ps],
    timer:sleep(50),
    %% Paused: not one more event once set/2 has returned.
    ok = tracekit_ring:set(R, #{paused => true}),
    #{written := W1} = tracekit_ring:stats(R),
    timer:sleep(100),
    #{written := W2, filtered := F2} = tracekit_ring:stats(R),
    ?assertEqual(W1, W2),
    ?assert(F2 > 0),
    %% Resumed, sends only: after the call, no receive is recorded.
    ok = tracekit_ring:set(R, #{paused => false, tags => [send]}),
    _ = tracekit_ring:drain(R),
    timer:sleep(100),
    Evs = tracekit_ring:drain(R),
    ?assert(length(Evs) > 100),
    ?assertEqual([send], lists:usort([element(3, E) || E <- Evs])),
    %% And back.
    ok = tracekit_ring:set(R, #{tags => all}),
    _ = tracekit_ring:drain(R),
    timer:sleep(100),
    Tags = lists:usort([element(3, E) || E <- tracekit_ring:drain(R)]),
    ?assertEqual(['receive', send], Tags),
    stop(Ps),
    trace:session_destroy(S).

%% sample => N keeps every Nth event of each thread: against the count of
%% what the VM offered (a parallel tracekit_count session), the ring keeps
%% a tenth, give or take one per producer thread.
set_sample(_Config) ->
    {ok, R} = tracekit_ring:new(#{size => 8 bsl 20}),
    {ok, C} = tracekit_count:new(),
    ok = tracekit_ring:set(R, #{sample => 10}),
    S1 = trace:session_create(sample_ring, {tracekit_ring, R}, []),
    S2 = trace:session_create(sample_count, {tracekit_count, C}, []),
    Self = self(),
    Ps = [spawn(fun() -> receive go -> [self() ! I || I <- lists:seq(1, 20000)],
                                       Self ! {done, self()} end end)
          || _ <- lists:seq(1, 8)],
    [1 = trace:process(S, P, true, [send]) || P <- Ps, S <- [S1, S2]],
    [P ! go || P <- Ps],
    [receive {done, P} -> ok end || P <- Ps],
    tk_collector:wait_dead(Ps),
    #{send := Offered} = tracekit_count:read(C),
    #{written := Written, filtered := Filtered, producers := Producers} = tracekit_ring:stats(R),
    ct:log("offered ~p written ~p filtered ~p producers ~p",
           [Offered, Written, Filtered, Producers]),
    ?assertEqual(Offered, Written + Filtered),
    ?assert(abs(Written - Offered / 10) =< Producers + 1),
    [trace:session_destroy(S) || S <- [S1, S2]].
