%% Differential tests of the breakpoint model (tracekit_model:bp_*) against
%% the VM's call_count breakpoints.
%%
%% The same trace:function/4 calls go to two VM sessions (S1, S2) and to the
%% model's sessions 0 and 1; the return values must agree (a number, or
%% badarg on both). Workloads run in a worker process that a third session
%% records with local call trace; its call events are replayed into the
%% model as calls. After every step, trace:info/3's `call_count' and
%% `traced' answers for every function of tk_bp_work in both sessions must
%% equal the model's.
%%
%% The call_count scenarios are this suite's own versions of OTP's
%% trace_call_count_SUITE (basic, on_and_off, info, pause_and_restart),
%% run in trace sessions.
-module(tracekit_bp_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, init_per_testcase/2, end_per_testcase/2]).
-export([basic/1, on_and_off/1, info/1, pause_and_restart/1,
         restart_pause_quirks/1, global_and_breakpoints/1, bad_patterns/1,
         two_sessions/1, concurrent_replay/1, random_sequences/1,
         long_calls_are_chunked/1]).
-export([chunked_on_peer/0]).

-define(W, tk_bp_work).

all() ->
    [basic, on_and_off, info, pause_and_restart, restart_pause_quirks,
     global_and_breakpoints, bad_patterns, two_sessions, concurrent_replay,
     random_sequences, long_calls_are_chunked].

%%% ---- the mirror -----------------------------------------------------------

init_per_testcase(Case, Config) ->
    {module, ?W} = code:ensure_loaded(?W),
    Funcs = [{?W, F, A} || {F, A} <- ?W:module_info(functions)],
    Exports = [{?W, F, A} || {F, A} <- ?W:module_info(exports)],
    Model = tracekit_model:bp_new([{MFA, lists:member(MFA, Exports)}
                                   || MFA <- Funcs]),
    Collector = tk_collector:start(),
    Idle = spawn(fun() -> receive stop -> ok end end),
    Name = fun(Suffix) -> list_to_atom(atom_to_list(Case) ++ Suffix) end,
    Rec = trace:session_create(Name("_rec"), Collector, []),
    NF = length(Funcs),
    NF = trace:function(Rec, {?W, '_', '_'}, true, [local]),
    S1 = trace:session_create(Name("_s1"), Idle, []),
    S2 = trace:session_create(Name("_s2"), Idle, []),
    Mirror = #{model => Model, vm => {S1, S2}, rec => Rec,
               collector => Collector, idle => Idle, funcs => Funcs,
               seen => 0},
    [{mirror, Mirror} | Config].

end_per_testcase(_Case, Config) ->
    #{vm := {S1, S2}, rec := Rec, collector := C, idle := Idle} =
        ?config(mirror, Config),
    [trace:session_destroy(S) || S <- [S1, S2, Rec]],
    tk_collector:stop(C),
    Idle ! stop,
    ok.

mirror(Config) ->
    ?config(mirror, Config).

vm_session(#{vm := {S1, _}}, 1) -> S1;
vm_session(#{vm := {_, S2}}, 2) -> S2.

%% trace:function/4 on the VM and the model; both answers must be equal.
fn(M = #{model := Model}, Sess, MFA, Pattern, Flags) ->
    Vm = try trace:function(vm_session(M, Sess), MFA, Pattern, Flags)
         catch error:badarg -> badarg end,
    Mo = try tracekit_model:bp_function(Model, Sess - 1, MFA, Pattern, Flags)
         catch error:badarg -> badarg end,
    ct:log("function(S~p, ~p, ~p, ~p): vm ~p, model ~p",
           [Sess, MFA, Pattern, Flags, Vm, Mo]),
    ?assertEqual(Vm, Mo, {function, Sess, MFA, Pattern, Flags}),
    Vm.

%% trace:info/3 on the VM and the model for one function; must be equal.
info(M = #{model := Model}, Sess, MFA, Item) ->
    Vm = trace:info(vm_session(M, Sess), MFA, Item),
    Mo = tracekit_model:bp_info(Model, Sess - 1, MFA, Item),
    ?assertEqual(Vm, Mo, {info, Sess, MFA, Item}),
    Vm.

count(M, Sess, MFA) ->
    {call_count, N} = info(M, Sess, MFA, call_count),
    N.

%% Every function, both sessions, both items. Returns the number of
%% nonzero counts.
check(M = #{funcs := Funcs}) ->
    Answers = [info(M, Sess, MFA, Item)
               || Sess <- [1, 2], MFA <- Funcs, Item <- [call_count, traced]],
    length([N || {call_count, N} <- Answers, is_integer(N), N > 0]).

%% Runs a workload in a fresh worker whose calls the recorder session
%% traces, then replays those calls into the model.
run(M = #{rec := Rec, collector := C, model := Model, seen := Seen}, Work) ->
    W = spawn(fun() -> receive go -> ?W:run(Work) end end),
    1 = trace:process(Rec, W, true, [call]),
    W ! go,
    tk_collector:wait_dead([W]),
    tk_collector:sync(Rec, W),
    Events = tk_collector:events(C),
    New = lists:nthtail(Seen, Events),
    Calls = lists:foldl(
              fun({trace, Pid, call, {Mod, F, Args}}, Acc) when Pid =:= W ->
                      maps:update_with({Mod, F, length(Args)},
                                       fun(N) -> N + 1 end, 1, Acc)
              end, #{}, New),
    ct:log("run ~p: ~p", [Work, Calls]),
    [ok = tracekit_model:bp_call(Model, MFA, N) || MFA := N <- Calls],
    M#{seen := length(Events)}.

%%% ---- OTP's call_count scenarios --------------------------------------------

basic(Config) ->
    M0 = mirror(Config),
    N = 1000,
    1 = fn(M0, 1, {?W, seq, '_'}, true, [call_count]),
    2 = fn(M0, 1, {?W, seq_r, '_'}, true, [call_count]),
    M1 = run(M0, {seq, N}),
    ?assertEqual(N, count(M1, 1, {?W, seq, 3})),
    ?assertEqual(0, count(M1, 1, {?W, seq_r, 3})),
    M2 = run(M1, {seq_r, N}),
    ?assertEqual(N, count(M2, 1, {?W, seq, 3})),
    ?assertEqual(1, count(M2, 1, {?W, seq_r, 3})),
    ?assertEqual(N, count(M2, 1, {?W, seq_r, 4})),
    ?assertEqual(false, count(M2, 1, {?W, succ, 1})),
    check(M2),
    NF = length(maps:get(funcs, M2)),
    NF = fn(M2, 1, {?W, '_', '_'}, false, [call_count]),
    check(M2).

on_and_off(Config) ->
    M0 = mirror(Config),
    N = 100,
    NF = length(maps:get(funcs, M0)),
    1 = fn(M0, 1, {?W, seq, '_'}, true, [call_count]),
    M1 = run(M0, {seq, N}),
    ?assertEqual(N, count(M1, 1, {?W, seq, 3})),
    %% Setting it again, through a wider pattern, zeroes it.
    NF = fn(M1, 1, {?W, '_', '_'}, true, [call_count]),
    ?assertEqual(0, count(M1, 1, {?W, seq, 3})),
    M2 = run(M1, {seq, N}),
    ?assertEqual(N, count(M2, 1, {?W, seq, 3})),
    ?assertEqual(N - 1, count(M2, 1, {?W, succ, 1})),
    1 = fn(M2, 1, {?W, seq, '_'}, false, [call_count]),
    ?assertEqual(false, count(M2, 1, {?W, seq, 3})),
    M3 = run(M2, {seq, N}),
    ?assertEqual(false, count(M3, 1, {?W, seq, 3})),
    ?assertEqual(0, count(M3, 1, {?W, seq_r, 4})),
    M4 = run(M3, {seq_r, N}),
    ?assertEqual(N, count(M4, 1, {?W, seq_r, 4})),
    check(M4),
    NF = fn(M4, 1, {?W, '_', '_'}, false, [call_count]),
    ?assertEqual(false, count(M4, 1, {?W, seq_r, 4})),
    M5 = run(M4, {seq_r, N}),
    ?assertEqual(false, count(M5, 1, {?W, seq_r, 4})),
    check(M5).

info(Config) ->
    M = mirror(Config),
    MFA = {?W, seq, 3},
    1 = fn(M, 1, MFA, true, [call_count]),
    ?assertEqual({call_count, 0}, info(M, 1, MFA, call_count)),
    1 = fn(M, 1, {?W, seq, '_'}, pause, [call_count]),
    ?assertEqual({call_count, 0}, info(M, 1, MFA, call_count)),
    1 = fn(M, 1, {?W, seq, '_'}, restart, [call_count]),
    ?assertEqual({call_count, 0}, info(M, 1, MFA, call_count)),
    1 = fn(M, 1, {?W, seq, '_'}, false, [call_count]),
    ?assertEqual({call_count, false}, info(M, 1, MFA, call_count)),
    ?assertEqual({traced, false}, info(M, 1, MFA, traced)),
    %% Functions that do not exist.
    ?assertEqual({call_count, undefined},
                 info(M, 1, {?W, no_such_function, 1}, call_count)),
    ?assertEqual({call_count, undefined},
                 info(M, 1, {?W, seq, 7}, call_count)),
    ?assertEqual(0, fn(M, 1, {?W, no_such_function, '_'}, true,
                       [call_count])),
    check(M).

pause_and_restart(Config) ->
    M0 = mirror(Config),
    N = 100,
    MFA = {?W, seq, 3},
    1 = fn(M0, 1, {?W, seq, '_'}, true, [call_count]),
    ?assertEqual(0, count(M0, 1, MFA)),
    M1 = run(M0, {seq, N}),
    ?assertEqual(N, count(M1, 1, MFA)),
    1 = fn(M1, 1, {?W, seq, '_'}, pause, [call_count]),
    ?assertEqual(N, count(M1, 1, MFA)),
    M2 = run(M1, {seq, N}),
    ?assertEqual(N, count(M2, 1, MFA)),
    1 = fn(M2, 1, {?W, seq, '_'}, restart, [call_count]),
    ?assertEqual(0, count(M2, 1, MFA)),
    M3 = run(M2, {seq, N}),
    ?assertEqual(N, count(M3, 1, MFA)),
    %% Setting it while paused zeroes it and counts again.
    1 = fn(M3, 1, {?W, seq, '_'}, pause, [call_count]),
    M4 = run(M3, {seq, N}),
    ?assertEqual(N, count(M4, 1, MFA)),
    1 = fn(M4, 1, {?W, seq, '_'}, true, [call_count]),
    ?assertEqual(0, count(M4, 1, MFA)),
    M5 = run(M4, {seq, 10}),
    ?assertEqual(10, count(M5, 1, MFA)),
    %% restart and pause of a function without a breakpoint: nothing.
    1 = fn(M5, 1, {?W, seq_r, 4}, restart, [call_count]),
    1 = fn(M5, 1, {?W, seq_r, 4}, pause, [call_count]),
    ?assertEqual(false, count(M5, 1, {?W, seq_r, 4})),
    M6 = run(M5, {seq_r, 10}),
    ?assertEqual(false, count(M6, 1, {?W, seq_r, 4})),
    check(M6).

%%% ---- beyond OTP's suite ------------------------------------------------------

%% restart and pause "without a breakpoint" means without one of the
%% session: with a local trace breakpoint and no counter, both create an
%% active counter; restart/pause with `local' turn local trace on.
restart_pause_quirks(Config) ->
    M0 = mirror(Config),
    MFA = {?W, seq, 3},
    1 = fn(M0, 1, MFA, true, [local]),
    1 = fn(M0, 1, MFA, pause, [call_count]),
    ?assertEqual(0, count(M0, 1, MFA)),
    M1 = run(M0, {seq, 10}),
    ?assertEqual(10, count(M1, 1, MFA)),
    1 = fn(M1, 1, {?W, seq_r, 4}, true, [call_time]),
    1 = fn(M1, 1, {?W, seq_r, 4}, restart, [call_count]),
    M2 = run(M1, {seq_r, 10}),
    ?assertEqual(10, count(M2, 1, {?W, seq_r, 4})),
    %% Another session's breakpoint does not count.
    1 = fn(M2, 2, {?W, succ, 1}, true, [call_count]),
    1 = fn(M2, 1, {?W, succ, 1}, restart, [call_count]),
    ?assertEqual(false, count(M2, 1, {?W, succ, 1})),
    1 = fn(M2, 1, {?W, twice, 1}, restart, [local]),
    ?assertEqual({traced, local}, info(M2, 1, {?W, twice, 1}, traced)),
    %% In one call, local is set before call_count: by then the session
    %% has a breakpoint, so `pause' creates an active counter.
    1 = fn(M2, 1, {?W, lam, 1}, pause, [local, call_count]),
    ?assertEqual({traced, local}, info(M2, 1, {?W, lam, 1}, traced)),
    ?assertEqual(0, count(M2, 1, {?W, lam, 1})),
    M3 = run(M2, {lam, 3}),
    ?assertEqual(1, count(M3, 1, {?W, lam, 1})),
    check(M3).

%% Global call trace (the export entry) and breakpoints exclude each other
%% within a session.
global_and_breakpoints(Config) ->
    M0 = mirror(Config),
    MFA = {?W, succ, 1},
    1 = fn(M0, 1, MFA, true, [call_count]),
    M1 = run(M0, {seq, 5}),
    ?assertEqual(4, count(M1, 1, MFA)),
    1 = fn(M1, 1, MFA, true, [global]),
    ?assertEqual(false, count(M1, 1, MFA)),
    ?assertEqual({traced, global}, info(M1, 1, MFA, traced)),
    %% No code breakpoint left for restart; global goes away.
    1 = fn(M1, 1, MFA, restart, [call_count]),
    ?assertEqual({traced, false}, info(M1, 1, MFA, traced)),
    ?assertEqual(false, count(M1, 1, MFA)),
    1 = fn(M1, 1, MFA, true, []),
    1 = fn(M1, 1, MFA, true, [call_count]),
    ?assertEqual({traced, false}, info(M1, 1, MFA, traced)),
    ?assertEqual(0, count(M1, 1, MFA)),
    %% Global over the module: matches exported functions only, and clears
    %% the session's breakpoints on all of them, local ones included.
    NF = length(maps:get(funcs, M1)),
    NF = fn(M1, 1, {?W, '_', '_'}, true, [local, call_count]),
    NE = length(?W:module_info(exports)),
    NE = fn(M1, 1, {?W, '_', '_'}, true, [global]),
    ?assertEqual(false, count(M1, 1, {?W, hidden, 1})),
    ?assertEqual({traced, false}, info(M1, 1, {?W, hidden, 1}, traced)),
    check(M1),
    %% Turning global off leaves breakpoints alone.
    1 = fn(M1, 1, MFA, true, [call_count]),
    1 = fn(M1, 1, MFA, false, []),
    ?assertEqual(0, count(M1, 1, MFA)),
    NE = fn(M1, 1, {?W, '_', '_'}, false, [global]),
    M2 = run(M1, {twice, 3}),
    check(M2).

bad_patterns(Config) ->
    M = mirror(Config),
    MFA = {?W, seq, 3},
    MS = [{'_', [], []}],
    badarg = fn(M, 1, MFA, MS, [call_count]),
    badarg = fn(M, 1, MFA, MS, [call_time, call_memory]),
    1 = fn(M, 1, MFA, MS, [local, call_count]),
    ?assertEqual({traced, local}, info(M, 1, MFA, traced)),
    badarg = fn(M, 1, MFA, true, [global, call_count]),
    badarg = fn(M, 1, MFA, true, [call_count, global]),
    badarg = fn(M, 1, MFA, true, [no_such_flag]),
    %% A session with a tracer takes no other meta tracer.
    badarg = fn(M, 1, MFA, true, [{meta, self()}]),
    badarg = fn(M, 1, MFA, true, [call_count | improper]),
    badarg = fn(M, 1, MFA, 42, [call_count]),
    badarg = fn(M, 1, {?W, '_', 3}, true, [call_count]),
    badarg = fn(M, 1, {?W, seq}, true, [call_count]),
    check(M),
    %% The model's own arguments.
    #{model := Model} = M,
    Bad = fun(F) -> ?assertError(badarg, F()) end,
    Bad(fun() -> tracekit_model:bp_new([]) end),
    Bad(fun() -> tracekit_model:bp_new([{{m, f, x}, true}]) end),
    Bad(fun() -> tracekit_model:bp_new([{{m, f, 1}, yes}]) end),
    Bad(fun() -> tracekit_model:bp_function(Model, 64, MFA, true, []) end),
    Bad(fun() -> tracekit_model:bp_function(make_ref(), 0, MFA, true, []) end),
    Bad(fun() -> tracekit_model:bp_info(Model, 0, {?W, seq, '_'},
                                        call_count) end),
    Bad(fun() -> tracekit_model:bp_info(Model, 0, MFA, call_time) end),
    Bad(fun() -> tracekit_model:bp_call(Model, {?W, nope, 0}, 1) end),
    Bad(fun() -> tracekit_model:bp_call(Model, MFA, -1) end),
    ?assertEqual(undefined, tracekit_model:bp_flags(Model, 0, {?W, nope, 0})),
    %% seq/3 has local (1) and call_count (4, active 8), in both
    %% generations.
    ?assertEqual({13, 13}, tracekit_model:bp_flags(Model, 0, MFA)).

%% Two sessions count the same functions independently.
two_sessions(Config) ->
    M0 = mirror(Config),
    MFA = {?W, seq, 3},
    1 = fn(M0, 1, {?W, seq, '_'}, true, [call_count]),
    1 = fn(M0, 2, {?W, seq, '_'}, true, [call_count]),
    M1 = run(M0, {seq, 20}),
    ?assertEqual(20, count(M1, 1, MFA)),
    ?assertEqual(20, count(M1, 2, MFA)),
    1 = fn(M1, 1, MFA, pause, [call_count]),
    1 = fn(M1, 2, MFA, restart, [call_count]),
    M2 = run(M1, {seq, 5}),
    ?assertEqual(20, count(M2, 1, MFA)),
    ?assertEqual(5, count(M2, 2, MFA)),
    1 = fn(M2, 2, MFA, false, [call_count]),
    M3 = run(M2, {seq, 5}),
    ?assertEqual(20, count(M3, 1, MFA)),
    ?assertEqual(false, count(M3, 2, MFA)),
    1 = fn(M3, 1, MFA, restart, [call_count]),
    M4 = run(M3, {seq, 3}),
    ?assertEqual(3, count(M4, 1, MFA)),
    check(M4).

%% Workers run at once on the VM; their calls are replayed into the model
%% by as many processes at once (the model's readers on several dirty
%% schedulers), while the test process keeps changing another function's
%% breakpoint in session 2 (the model's writer, with its grace periods).
concurrent_replay(Config) ->
    M0 = #{rec := Rec, collector := C, model := Model} = mirror(Config),
    NF = length(maps:get(funcs, M0)),
    NF = fn(M0, 1, {?W, '_', '_'}, true, [call_count]),
    Works = [{seq, 300}, {seq_r, 300}, {lam, 40}, {seq, 150}],
    Ws = [spawn(fun() -> receive go -> ?W:run(Work) end end) || Work <- Works],
    [1 = trace:process(Rec, W, true, [call]) || W <- Ws],
    [W ! go || W <- Ws],
    tk_collector:wait_dead(Ws),
    [tk_collector:sync(Rec, W) || W <- Ws],
    Events = tk_collector:events(C),
    Self = self(),
    Replayers =
        [spawn_link(
           fun() ->
                   [ok = tracekit_model:bp_call(Model, {Mod, F, length(As)}, 1)
                    || {trace, P, call, {Mod, F, As}} <- Events, P =:= W],
                   Self ! {replayed, self()}
           end) || W <- Ws],
    Toggle = fun Loop(I) ->
                     Op = lists:nth(I rem 4 + 1, [true, pause, restart, false]),
                     1 = fn(M0, 2, {?W, hidden, 1}, Op, [call_count]),
                     case [R || R <- Replayers, is_process_alive(R)] of
                         [] -> I;
                         _ -> Loop(I + 1)
                     end
             end,
    Changes = Toggle(0),
    [receive {replayed, R} -> ok end || R <- Replayers],
    ct:log("~p changes while replaying ~p events", [Changes, length(Events)]),
    M1 = M0#{seen := length(Events)},
    ?assertEqual(450, count(M1, 1, {?W, seq, 3})),
    ?assertEqual(300, count(M1, 1, {?W, seq_r, 4})),
    check(M1).

%% Random patterns and workloads in both sessions, compared after every
%% step.
random_sequences(Config) ->
    Seed = {erlang:phash2(make_ref()), 17, 4711},
    ct:log("seed ~p", [Seed]),
    _ = rand:seed(exsss, Seed),
    M0 = mirror(Config),
    Steps = 150,
    {_, Nonzero} =
        lists:foldl(fun(I, {M, Acc}) ->
                            M1 = random_step(M),
                            N = check(M1),
                            ct:log("step ~p: ~p nonzero counts", [I, N]),
                            {M1, Acc + N}
                    end, {M0, 0}, lists:seq(1, Steps)),
    ct:log("nonzero counts compared: ~p", [Nonzero]).

random_step(M) ->
    case rand:uniform(5) of
        N when N =< 3 ->
            _ = fn(M, rand:uniform(2), pick(mfas()), pick(patterns()),
                   random_flags()),
            M;
        _ ->
            run(M, pick([{seq, rand:uniform(40)}, {seq_r, rand:uniform(40)},
                         {twice, rand:uniform(10)}, {lam, rand:uniform(8)}]))
    end.

mfas() ->
    [{?W, '_', '_'}, {?W, seq, '_'}, {?W, seq, 3}, {?W, seq_r, '_'},
     {?W, seq_r, 4}, {?W, succ, 1}, {?W, hidden, 1}, {?W, twice, '_'},
     {?W, lam, 1}, {?W, nope, 0}].

patterns() ->
    [true, true, false, false, restart, restart, pause, pause, [],
     [{'_', [], []}]].

random_flags() ->
    case rand:uniform(8) of
        1 -> [];
        2 -> [global];
        _ -> [F || F <- [call_count, local, call_time, call_memory],
                   rand:uniform(2) =:= 1]
    end.

pick(L) ->
    lists:nth(rand:uniform(length(L)), L).

%%% ---- the model's own limits ---------------------------------------------------

%% A huge call count neither holds a dirty scheduler nor makes its caller
%% unkillable: on a node with one dirty CPU scheduler, a dirty NIF (a
%% ring's creation) completes while bp_call(..., 1 bsl 62) runs, and the
%% caller dies at once when killed.
long_calls_are_chunked(_Config) ->
    Paths = [filename:dirname(code:which(M))
             || M <- [tracekit_model, tracekit_ring, ?MODULE]],
    {ok, Peer, _} = peer:start_link(#{connection => standard_io,
                                   args => ["+SDcpu", "1"
                                            | lists:append([["-pa", P] || P <- Paths])]}),
    try
        ?assertEqual(ok, peer:call(Peer, ?MODULE, chunked_on_peer, [], 30000))
    after
        peer:stop(Peer)
    end.

chunked_on_peer() ->
    MFA = {lists, seq, 2},
    Model = tracekit_model:bp_new([{MFA, true}]),
    {Pid, Mon} = spawn_monitor(fun() -> tracekit_model:bp_call(Model, MFA, 1 bsl 62) end),
    timer:sleep(200),
    Self = self(),
    _ = spawn(fun() -> Self ! {ring, tracekit_ring:new(#{size => 4096})} end),
    receive {ring, {ok, _}} -> ok
    after 10000 -> error(dirty_scheduler_held)
    end,
    exit(Pid, kill),
    receive {'DOWN', Mon, process, Pid, killed} -> ok
    after 10000 -> error(unkillable)
    end.
