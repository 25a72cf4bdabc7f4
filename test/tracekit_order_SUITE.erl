%% Per-process order across schedulers, in a VM that migrates processes
%% all the time: a node with 8 schedulers on however few cores the
%% machine has (+S 8:8: +S 8 alone keeps only as many online as there are
%% cores), where tokens hop between processes at random. At each hop the
%% process that passes the token on binds itself to a random scheduler or
%% to none (process_flag(scheduler, N)): when it next wakes up, the VM
%% puts it in that scheduler's run queue, or where it was woken, and idle
%% schedulers steal; either way through the VM's own migration path.
%% Every process is traced for send and 'receive' with its
%% scheduler id, at the same time by OTP's process tracer (the reference)
%% and by a ring; the ring's events, merged from the rings of all the
%% schedulers, must equal the process tracer's, process by process and in
%% order. Run with the default stamp (a plain TSC read, see
%% c_src/lib/tk_clock.h) and with TRACEKIT_CLOCK=fenced.
-module(tracekit_order_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, suite/0]).
-export([default_stamp/1, fenced_stamp/1]).
-export([workload/2]).

-define(PROCS, 32).
-define(TOKENS, 16).

suite() ->
    [{timetrap, {minutes, 10}}].

all() ->
    [default_stamp, fenced_stamp].

default_stamp(_Config) ->
    run([], 3).

fenced_stamp(_Config) ->
    run([{"TRACEKIT_CLOCK", "fenced"}], 1).

%% Rounds runs of the workload in a node with 8 schedulers and Env.
run(Env, Rounds) ->
    Dirs = lists:usort([filename:dirname(code:which(M))
                        || M <- [tracekit_ring, tk_collector, ?MODULE]]),
    {ok, Peer, _} = peer:start_link(#{connection => standard_io, env => Env,
                                      args => ["+S", "8:8" | lists:append([["-pa", D] || D <- Dirs])]}),
    try
        8 = peer:call(Peer, erlang, system_info, [schedulers_online]),
        Hops = 10000,
        [begin
             R = peer:call(Peer, ?MODULE, workload, [Hops, N], 300000),
             ct:log("round ~p: ~p", [N, R]),
             ?assertMatch({same, _, _}, R),
             {same, Events, Migrations} = R,
             %% Per token: Hops + 1 receives, Hops sends and `done';
             %% per process: the ring and `stop' received.
             ?assertEqual(?TOKENS * (Hops + 1) * 2 + 2 * ?PROCS, Events),
             %% The order was checked across many migrations (a process
             %% can move only between a receive and the next send: at
             %% most every other event).
             ?assert(Migrations > Events div 5)
         end || N <- lists:seq(1, Rounds)],
        ok
    after
        peer:stop(Peer)
    end.

%% In the node under test: the tokens' run, traced by both tracers.
%% {same, Events, Migrations} (events of each tracer; consecutive events
%% of a process on different schedulers), or {differ, Tracee, Expected,
%% Got} from the first event that differs.
workload(Hops, _Round) ->
    {module, _} = code:ensure_loaded(tracekit_ring),
    {ok, R} = tracekit_ring:new(#{size => 16 bsl 20}),
    Collector = tk_collector:start(),
    Ref = trace:session_create(order_ref, Collector, []),
    Rng = trace:session_create(order_ring, {tracekit_ring, R}, []),
    Self = self(),
    Procs = [spawn(fun() -> receive {ring, Ring} -> hop(Ring, Self) end end)
             || _ <- lists:seq(1, ?PROCS)],
    Flags = [send, 'receive', scheduler_id],
    [1 = trace:process(S, P, true, Flags) || S <- [Ref, Rng], P <- Procs],
    Ring = list_to_tuple(Procs),
    [P ! {ring, Ring} || P <- Procs],
    [element(I, Ring) ! {tok, Hops} || I <- lists:seq(1, ?TOKENS)],
    [receive done -> ok end || _ <- lists:seq(1, ?TOKENS)],
    [P ! stop || P <- Procs],
    tk_collector:wait_dead(Procs),
    ok = tk_collector:sync(Ref, all),
    Expected = tk_collector:events(Collector),
    trace:session_destroy(Ref),
    trace:session_destroy(Rng),
    tk_collector:stop(Collector),
    Got = tracekit_ring:drain(R),
    #{dropped := 0} = tracekit_ring:stats(R),
    tracekit_ring:close(R),
    compare(Procs, Expected, Got).

hop(Ring, Parent) ->
    receive
        {tok, 0} ->
            Parent ! done,
            hop(Ring, Parent);
        {tok, N} ->
            _ = process_flag(scheduler, rand:uniform(9) - 1),
            element(rand:uniform(tuple_size(Ring)), Ring) ! {tok, N - 1},
            hop(Ring, Parent);
        stop ->
            ok
    end.

compare(Procs, Expected, Got) ->
    E = by_tracee(Expected, Procs),
    G = by_tracee(Got, Procs),
    case first_difference(E, G) of
        none ->
            {same, length(Got),
             lists:sum([migrations(Evs) || {_, Evs} <- G])};
        Diff ->
            Diff
    end.

%% Each tracee's events, in their order (one pass: a pass per tracee
%% took a second a round).
by_tracee(Events, Procs) ->
    Groups = maps:groups_from_list(fun(Ev) -> element(2, Ev) end, Events),
    [{P, maps:get(P, Groups, [])} || P <- Procs].

first_difference([], []) ->
    none;
first_difference([{P, Es} | E], [{P, Es} | G]) ->
    first_difference(E, G);
first_difference([{P, Es} | _], [{P, Gs} | _]) ->
    {Es1, Gs1} = drop_common(Es, Gs),
    {differ, P, lists:sublist(Es1, 5), lists:sublist(Gs1, 5)}.

drop_common([X | Xs], [X | Ys]) -> drop_common(Xs, Ys);
drop_common(Xs, Ys) -> {Xs, Ys}.

%% The scheduler id is the last element of each event.
migrations([]) ->
    0;
migrations(Evs) ->
    Scheds = [element(tuple_size(Ev), Ev) || Ev <- Evs],
    length([x || {A, B} <- lists:zip(lists:droplast(Scheds), tl(Scheds)), A =/= B]).
