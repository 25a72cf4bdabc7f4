%% The trace session model (tracekit_model:session_*) mirrored against the
%% VM: random sequences of session_create/session_destroy, process/4,
%% port/4, function/4, send/3, recv/3, spawns, links, exits, calls and
%% info questions run on the VM and on the model; every answer must be the
%% same, and after every step so must every trace:info/3 and
%% trace:session_info/1 answer and every process's process_info(P, trace).
%%
%% The VM's answers are put into the model's terms first: tracers become
%% {tracer, Key}, match specifications {ms, Key}, per-process call_time and
%% call_memory data `call_data', weak ids count from the sequence's first
%% session, and sessions made by others are left out.
-module(tracekit_session_prop_SUITE).

-include_lib("common_test/include/ct.hrl").
%% The PropEr of the Debian packages has no include files: the property
%% uses the functions behind PropEr's macros.
-import(proper_types, [list/1, frequency/1, choose/2, boolean/0, elements/1,
                       vector/2]).

-export([all/0, init_per_suite/1, end_per_suite/1]).
-export([scenarios/1, random_sequences/1]).
-export([worker/0]).
%% For running a step list by hand (e.g. a shrunk counterexample).
-export([run/2]).

%% Sequences per run; TK_PROP_NUMTESTS asks for more (or fewer).
-define(NUMTESTS, 500).
-define(MAX_PROCS, 10).
-define(MAX_PORTS, 3).
-define(FUNS, tk_session_funs).

all() ->
    [scenarios, random_sequences].

init_per_suite(Config) ->
    {module, _} = code:ensure_loaded(?FUNS),
    {module, _} = code:ensure_loaded(tracekit_count),
    Sink = spawn(fun sink/0),
    {ok, Counter} = tracekit_count:new(),
    Release = list_to_integer(erlang:system_info(otp_release)),
    [{ctx, #{sink => Sink, counter => Counter, release => Release}}
     | Config].

end_per_suite(Config) ->
    #{sink := Sink} = ?config(ctx, Config),
    exit(Sink, kill),
    ok.

%% A tracer that drops what it gets.
sink() ->
    receive _ -> sink() end.

%%% ---- test cases -------------------------------------------------------------

%% Sequences that pin down what the VM was seen to do; the same harness
%% as the property runs them.
scenarios(Config) ->
    Ctx = ?config(ctx, Config),
    Scenarios =
        [%% spawn inheritance in two sessions, first-spawn clearing
         [{create, 0, 0, false}, {create, 1, 1, false},
          {process, 0, {proc, 0}, true, [set_on_spawn, send]},
          {process, 1, {proc, 0}, true, [set_on_first_spawn, 'receive']},
          {spawn, 0, false}, {spawn, 0, false},
          {process, 1, {proc, 0}, true, [set_on_first_spawn]},
          {spawn, 0, false}, {spawn, 3, true}],
         %% defaults for new processes and the parent's flags
         [{create, 0, 0, false}, {create, 1, 0, false}, {create, 0, 1, false},
          {process, 2, {proc, 0}, true, [set_on_spawn, send]},
          {process, 1, {proc, 0}, true, [set_on_spawn, 'receive']},
          {process, 0, new, true, [procs]},
          {process, 1, new, true, [call, ports]},
          {spawn, 0, false}, {spawn, 0, true},
          {process, 1, new, false, [call]}, {spawn, 0, false}],
         %% link inheritance, relinking, unlinking
         [{create, 0, 0, false}, {create, 1, 1, false},
          {spawn, 0, false}, {spawn, 0, false},
          {process, 1, {proc, 1}, true, [set_on_link, send]},
          {process, 0, {proc, 1}, true, [set_on_first_link, call]},
          {link, 1, 2}, {link, 1, 2}, {unlink, 2, 1},
          {process, 0, {proc, 1}, true, [set_on_first_link]},
          {link, 1, 2}, {link, 2, 0}, {kill, 1}, {spawn, 2, true}],
         %% link/1 adds the linking process's flags to those the other
         %% process already has in that session
         [{create, 0, 0, false}, {spawn, 0, false}, {spawn, 0, false},
          {process, 0, {proc, 2}, true, [call, procs]},
          {process, 0, {proc, 1}, true, [set_on_link, send]},
          {link, 1, 2}, {info, 0, {proc, 2}, flags},
          {process, 0, {proc, 1}, true, [set_on_first_link]},
          {process, 0, {proc, 0}, true, ['receive']},
          {link, 1, 0}, {info, 0, {proc, 0}, flags}],
         %% all/existing counts, port flags on processes and back
         [{create, 0, 0, false}, {open_port}, {spawn, 0, false},
          {process, 0, existing, true, []},
          {process, 0, existing, true, [ports]},
          {process, 0, existing, true, [send, ports]},
          {process, 0, {proc, 1}, true, [all]},
          {port, 0, {port, 0}, true, [call, procs]},
          {port, 0, all, true, [send, call]},
          {process, 0, all, true, [cpu_timestamp]},
          {process, 0, {port, 0}, true, [send]},
          {open_port}, {close_port, 0}, {port, 0, existing, false, [send]}],
         %% function patterns, exclusivity, counters
         [{create, 0, 0, false}, {create, 1, 1, false},
          {function, 0, {?FUNS, '_', '_'}, true, [global]},
          {function, 0, {?FUNS, f, '_'}, true, [local]},
          {function, 0, {?FUNS, h, 1}, true, [global]},
          {function, 1, {?FUNS, f, 1}, {ms, 1}, [local, meta]},
          {function, 1, {?FUNS, f, 1}, true, [call_count]},
          {call, 1}, {call, 1},
          {function, 1, {?FUNS, f, 1}, {ms, 2}, [call_count]},
          {function, 1, {?FUNS, f, 1}, pause, [call_count]}, {call, 1},
          {function, 1, {?FUNS, h, 1}, restart, [call_count, call_time]},
          {function, 0, {?FUNS, g, 1}, pause, []},
          {function, 0, {?FUNS, '_', 1}, true, []},
          {function, 0, {lists, seq, '_'}, true, [local, call_time]},
          {destroy, 0, false}, {destroy, 0, true}, {destroy, 0, false}],
         %% events and on_load
         [{create, 0, 0, false}, {send, 0, false, []},
          {recv, 0, {ms, 4}, []}, {send, 0, restart, []},
          {send, 0, true, [global]}, {recv, 0, [], []},
          {function, 0, on_load, {ms, 1}, []},
          {function, 0, on_load, true, [meta]},
          {function, 0, on_load, false, [meta]},
          {function, 0, on_load, true, [local, call_count]},
          {function, 0, on_load, restart, [call_time]},
          {function, 0, on_load, false, [local]}]],
    lists:foreach(
      fun(Steps) ->
              case run(Ctx, Steps) of
                  ok -> ok;
                  Failure -> ct:fail({Failure, Steps})
              end
      end, Scenarios).

random_sequences(Config) ->
    Ctx = ?config(ctx, Config),
    Prop = proper:forall(
             steps(),
             fun(Steps) ->
                     R = run(Ctx, Steps),
                     proper:whenfail(
                       fun() ->
                               ct:pal("steps: ~p~nmismatch: ~p", [Steps, R])
                       end,
                       fun() -> R =:= ok end)
             end),
    NumTests = case os:getenv("TK_PROP_NUMTESTS") of
                   false -> ?NUMTESTS;
                   N -> list_to_integer(N)
               end,
    put(tk_stats, #{}),
    T0 = erlang:monotonic_time(millisecond),
    Result = proper:quickcheck(Prop, [{numtests, NumTests}, {max_size, 80},
                                      {on_output, fun ct_output/2}]),
    T = erlang:monotonic_time(millisecond) - T0,
    ct:pal("~p sequences on OTP ~p in ~p ms~nsteps and answers: ~p",
           [NumTests, maps:get(release, Ctx), T, erase(tk_stats)]),
    case Result of
        true ->
            ok;
        _ ->
            Shrunk = proper:counterexample(),
            ct:pal("shrunk sequence: ~p", [Shrunk]),
            ct:fail({model_disagrees, Shrunk})
    end.

ct_output(Fmt, Args) ->
    ct:log(Fmt, Args).

%%% ---- generators --------------------------------------------------------------

%% Every sequence starts with a session (that the shrinker may still
%% change into a failing create).
steps() ->
    proper_types:bind({create_step(), list(frequency([{12, [step()]},
                                                      {1, linked_pair()}]))},
                      fun({Create, Steps}) -> [Create | lists:append(Steps)] end,
                      false).

%% Two processes with flags in one session, then a link between them: the
%% set-on-link rule adds to flags the other process already has.
linked_pair() ->
    proper_types:bind(
      {idx(), idx(), idx(), flags(), flags(),
       elements([set_on_link, set_on_first_link])},
      fun({S, A, B, FA, FB, Sol}) ->
              [{process, S, {proc, B}, true, FB},
               {process, S, {proc, A}, true, [Sol | FA]},
               {link, A, B}]
      end, false).

create_step() ->
    {create, frequency([{9, 0}, {9, 1}, {2, 2}]),
     frequency([{9, 0}, {9, 1}, {2, 2}]), weighted_bool(0.05)}.

step() ->
    frequency(
      [{3, create_step()},
       {1, {destroy, idx(), weighted_bool(0.3)}},
       {8, {process, idx(), proc_spec(), how(), flags()}},
       {3, {port, idx(), port_spec(), how(), flags()}},
       {6, {function, idx(), target(), fun_ms(), fun_flags()}},
       {1, {send, idx(), event_ms(), event_flags()}},
       {1, {recv, idx(), event_ms(), event_flags()}},
       {4, {spawn, idx(), boolean()}},
       {2, {link, idx(), idx()}},
       {1, {unlink, idx(), idx()}},
       {1, {kill, idx()}},
       {1, {open_port}},
       {1, {close_port, idx()}},
       {2, {call, choose(0, 2)}},
       {2, {info, idx(), what(), item()}},
       {1, {session_info, what()}}]).

idx() -> choose(0, 7).

weighted_bool(P) ->
    frequency([{round(P * 100), true}, {round((1 - P) * 100), false}]).

how() ->
    frequency([{6, true}, {3, false}, {1, perhaps}]).

proc_spec() ->
    frequency([{8, {proc, idx()}}, {1, {port, idx()}}, {2, all}, {2, existing},
               {2, new}, {1, processes}, {1, existing_processes},
               {1, new_processes}, {1, ports}, {1, bogus}]).

port_spec() ->
    frequency([{6, {port, idx()}}, {1, {proc, idx()}}, {2, all}, {2, existing},
               {2, new}, {1, ports}, {1, existing_ports}, {1, new_ports},
               {1, processes}]).

flag_names() ->
    [send, 'receive', set_on_spawn, set_on_first_spawn, set_on_link,
     set_on_first_link, call, procs, running, exiting, arity, return_to,
     silent, timestamp, monotonic_timestamp, strict_monotonic_timestamp,
     scheduler_id, running_procs, running_ports, ports,
     %% these two are kept to the first session (see run_step/3)
     garbage_collection, all].

flags() ->
    frequency([{20, short_list(elements(flag_names()))},
               {1, [cpu_timestamp]},
               {1, [send, bogus_flag]},
               {1, [{tracer, self()}]}]).

short_list(G) ->
    proper_types:bind(frequency([{2, 0}, {6, 1}, {4, 2}, {2, 3}, {1, 4}]),
                      fun(N) -> vector(N, G) end, false).

target() ->
    frequency([{6, elements([{?FUNS, f, 0}, {?FUNS, f, 1}, {?FUNS, g, 1},
                             {?FUNS, h, 1}, {?FUNS, k, 0},
                             {?FUNS, module_info, 1}, {?FUNS, nope, 0}])},
               {4, elements([{?FUNS, f, '_'}, {?FUNS, h, '_'},
                             {?FUNS, '_', '_'}, {lists, seq, 2},
                             {lists, seq, '_'}])},
               {1, elements([{tk_no_such_module, f, 0}, {?FUNS, f, 300}])},
               {2, elements([on_load, send, 'receive'])},
               {1, elements([{?FUNS, '_', 0}, {'_', f, 0}, {?FUNS, f},
                             bogus, "f"])}]).

fun_ms() ->
    frequency([{6, true}, {3, false}, {1, []}, {2, restart}, {2, pause},
               {3, {ms, 1}}, {2, {ms, 2}}, {1, bad_ms}]).

fun_flags() ->
    frequency([{20, short_list(elements([global, local, meta, call_count,
                                         call_time, call_memory]))},
               {1, [local, bogus_flag]},
               {1, [{meta, self()}]}]).

event_ms() ->
    frequency([{3, true}, {3, false}, {1, []}, {2, {ms, 3}}, {2, {ms, 4}},
               {1, restart}, {1, bad_ms}]).

event_flags() ->
    frequency([{8, []}, {1, [local]}, {1, [global]}, {1, [bogus_flag]}]).

what() ->
    frequency([{4, {proc, idx()}}, {2, {port, idx()}},
               {4, {func, choose(0, 12)}},
               {3, elements([new, new_processes, new_ports, on_load, send,
                             'receive', all, any, existing, bogus,
                             {?FUNS, f, '_'}])}]).

item() ->
    elements([flags, tracer, traced, match_spec, meta, meta_match_spec,
              call_count, call_time, call_memory, all, bogus]).

%%% ---- running a sequence --------------------------------------------------------

-record(ses, {handle, weak, sid}).
-record(run, {ctx, model, sessions = [], procs = [], ports = [], funcs = [],
              base}).

%% Runs the steps on the VM and on the model: ok, or {mismatch, What}.
%% Whatever happens, the sessions, processes and ports made are gone
%% afterwards, so that sequences do not see each other.
run(Ctx, Steps) ->
    R0 = setup(Ctx),
    Result =
        try
            lists:foldl(
              fun(Step, {N, R1}) ->
                      count(element(1, Step)),
                      R2 = in_step(N, Step, fun() -> run_step(Step, R1) end),
                      in_step(N, Step, fun() -> snapshot(R2) end),
                      {N + 1, R2}
              end, {1, R0}, Steps),
            ok
        catch
            throw:{mismatch, _} = M -> M;
            Class:Reason:Stack -> {crash, Class, Reason, Stack}
        end,
    case cleanup() of
        ok -> Result;
        Mismatch when Result =:= ok -> Mismatch;
        _ -> Result
    end.

in_step(N, Step, F) ->
    try F()
    catch throw:{mismatch, M} ->
            throw({mismatch, M#{step => N, step_was => Step}})
    end.

setup(Ctx = #{release := Rel}) ->
    put(tk_sessions, []),
    put(tk_procs, []),
    put(tk_ports, []),
    M = tracekit_model:session_new(Rel),
    Funcs = [begin
                 Id = tracekit_model:session_add_function(M, MFA, Exp),
                 {MFA, Id}
             end || {MFA, Exp} <- universe()],
    Root = spawn(fun worker/0),
    put(tk_procs, [Root]),
    {tracee, _} = RootT = tracekit_model:session_spawn(M, none, false),
    #run{ctx = Ctx, model = M, funcs = Funcs, procs = [{Root, RootT}]}.

%% The functions patterns can reach: the test module and lists:seq/2,3.
universe() ->
    Exports = ?FUNS:module_info(exports),
    ListsExports = lists:module_info(exports),
    [{{?FUNS, F, A}, lists:member({F, A}, Exports)}
     || {F, A} <- ?FUNS:module_info(functions)]
        ++ [{{lists, seq, A}, lists:member({seq, A}, ListsExports)}
            || {seq, A} <- lists:module_info(functions)].

cleanup() ->
    [vm(fun() -> trace:session_destroy(H) end)
     || #ses{handle = H} <- get(tk_sessions)],
    Procs = get(tk_procs),
    [exit(P, kill) || P <- Procs],
    [gen_udp:close(P) || P <- get(tk_ports)],
    wait_dead(Procs),
    %% The next sequence spawns from this process: the trace cleaner must
    %% have stripped the destroyed sessions' refs from it.
    case wait_until(fun() -> process_info(self(), trace) =:= {trace, 0} end,
                    10000) of
        true -> ok;
        false -> {mismatch, #{question => runner_traced_after_cleanup,
                              vm => process_info(self(), trace)}}
    end.

wait_dead(Pids) ->
    Refs = [monitor(process, P) || P <- Pids],
    [receive {'DOWN', Ref, process, _, _} -> ok end || Ref <- Refs],
    ok.

wait_until(F, Ms) when Ms =< 0 ->
    F();
wait_until(F, Ms) ->
    case F() of
        true -> true;
        false -> timer:sleep(1), wait_until(F, Ms - 1)
    end.

worker() ->
    process_flag(trap_exit, true),
    worker_loop().

worker_loop() ->
    receive
        {spawn, Link, From} ->
            Child = case Link of
                        true -> spawn_link(fun worker/0);
                        false -> spawn(fun worker/0)
                    end,
            From ! {spawned, self(), Child};
        {link, Other, From} ->
            link(Other),
            Other ! {sync, From};
        {unlink, Other, From} ->
            unlink(Other),
            Other ! {sync, From};
        {sync, From} ->
            From ! {synced, self()};
        _ ->
            ok
    end,
    worker_loop().

%%% ---- steps -----------------------------------------------------------------------

nth(I, L) -> lists:nth(I rem length(L) + 1, L).

session(I, #run{sessions = Ss}) when Ss =/= [] -> {I rem length(Ss), nth(I, Ss)};
session(_, _) -> none.

run_step({create, NameI, TracerI, BadOpts}, R = #run{model = M, ctx = Ctx}) ->
    Name = element(NameI + 1, {tk_a, tk_b, "tk_c"}),
    {Tracer, Key} = tracer(TracerI, Ctx),
    Opts = case BadOpts of true -> [bogus]; false -> [] end,
    VM = vm(fun() -> trace:session_create(Name, Tracer, Opts) end),
    ArgsOk = is_atom(Name) andalso TracerI =/= 2 andalso Opts =:= [],
    MName = case is_atom(Name) of true -> Name; false -> tk_c end,
    Model = tracekit_model:session_create(M, MName, Key, ArgsOk),
    case {VM, Model} of
        {badarg, badarg} ->
            R;
        {{_, {Name, W}} = Handle, {Sid, MW}} ->
            Base = case R#run.base of undefined -> W - MW; B -> B end,
            same(weak_id, W - Base, MW),
            S = #ses{handle = Handle, weak = {Name, W}, sid = Sid},
            put(tk_sessions, [S | get(tk_sessions)]),
            R#run{sessions = R#run.sessions ++ [S], base = Base};
        _ ->
            mismatch(session_create, VM, Model)
    end;
run_step({destroy, I, ByWeak}, R = #run{model = M}) ->
    case session(I, R) of
        none ->
            R;
        {_, #ses{handle = H, weak = W, sid = Sid}} ->
            Arg = case ByWeak of true -> W; false -> H end,
            VM = vm(fun() -> trace:session_destroy(Arg) end),
            same(session_destroy, VM,
                 tracekit_model:session_destroy(M, Sid, ByWeak)),
            VM =:= true andalso wait_cleaner(R),
            R
    end;
run_step({process, I, Spec, How, Flags}, R) ->
    trace_step(process, I, Spec, How, Flags, R);
run_step({port, I, Spec, How, Flags}, R) ->
    trace_step(port, I, Spec, How, Flags, R);
run_step({function, I, Target, MS, Flags}, R = #run{model = M}) ->
    with_session(I, R, fun(_, #ses{handle = H, sid = Sid}) ->
        VM = vm(fun() -> trace:function(H, Target, ms_term(MS), Flags) end),
        same({function, Target, MS, Flags}, VM,
             tracekit_model:session_function(M, Sid, Target, ms_arg(MS), Flags)),
        R
    end);
run_step({send, I, MS, Flags}, R = #run{model = M}) ->
    with_session(I, R, fun(_, #ses{handle = H, sid = Sid}) ->
        VM = vm(fun() -> trace:send(H, ms_term(MS), Flags) end),
        same({send, MS, Flags}, VM,
             tracekit_model:session_send(M, Sid, ms_arg(MS), Flags)),
        R
    end);
run_step({recv, I, MS, Flags}, R = #run{model = M}) ->
    with_session(I, R, fun(_, #ses{handle = H, sid = Sid}) ->
        VM = vm(fun() -> trace:recv(H, ms_term(MS), Flags) end),
        same({recv, MS, Flags}, VM,
             tracekit_model:session_recv(M, Sid, ms_arg(MS), Flags)),
        R
    end);
run_step({spawn, I, Link}, R = #run{model = M, procs = Ps}) ->
    {Parent, PT} = nth(I, Ps),
    case length(Ps) < ?MAX_PROCS andalso is_process_alive(Parent) of
        false ->
            R;
        true ->
            Parent ! {spawn, Link, self()},
            Child = receive {spawned, Parent, C} -> C
                    after 5000 -> error({no_spawn_reply, Parent})
                    end,
            put(tk_procs, [Child | get(tk_procs)]),
            CT = tracekit_model:session_spawn(M, PT, Link),
            R#run{procs = Ps ++ [{Child, CT}]}
    end;
run_step({Op, I, J}, R = #run{model = M, procs = Ps})
  when Op =:= link; Op =:= unlink ->
    {A, AT} = nth(I, Ps),
    {B, BT} = nth(J, Ps),
    case is_process_alive(A) andalso is_process_alive(B) of
        false ->
            R;
        true ->
            A ! {Op, B, self()},
            receive {synced, B} -> ok
            after 5000 -> error({no_sync, Op, A, B})
            end,
            MOp = case Op of link -> session_link; unlink -> session_unlink end,
            ok = tracekit_model:MOp(M, AT, BT),
            R
    end;
run_step({kill, I}, R = #run{model = M, procs = [_ | Ps]}) when Ps =/= [] ->
    {P, PT} = nth(I, Ps),
    case is_process_alive(P) of
        false ->
            R;
        true ->
            exit(P, kill),
            wait_dead([P]),
            ok = tracekit_model:session_exit(M, PT),
            R
    end;
run_step({open_port}, R = #run{model = M, ports = Ports})
  when length(Ports) < ?MAX_PORTS ->
    {ok, Port} = gen_udp:open(0, [{ip, loopback}]),
    put(tk_ports, [Port | get(tk_ports)]),
    PT = tracekit_model:session_open_port(M),
    R#run{ports = Ports ++ [{Port, PT}]};
run_step({close_port, I}, R = #run{model = M, ports = Ports}) when Ports =/= [] ->
    {Port, PT} = nth(I, Ports),
    case erlang:port_info(Port) of
        undefined ->
            R;
        _ ->
            ok = gen_udp:close(Port),
            true = wait_until(fun() -> erlang:port_info(Port) =:= undefined end,
                              5000),
            ok = tracekit_model:session_exit(M, PT),
            R
    end;
run_step({call, K}, R = #run{model = M, funcs = Funcs}) ->
    Ran = case K of
              0 -> ?FUNS:f(), [{?FUNS, f, 0}];
              1 -> ?FUNS:f(1), [{?FUNS, f, 1}, {?FUNS, h, 1}];
              2 -> ?FUNS:g(1), [{?FUNS, g, 1}]
          end,
    [ok = tracekit_model:session_call(M, proplists:get_value(MFA, Funcs))
     || MFA <- Ran],
    R;
run_step({info, I, What, Item}, R = #run{model = M}) ->
    with_session(I, R, fun(_, #ses{handle = H, sid = Sid}) ->
        {VMWhat, MWhat} = resolve_what(What, R),
        ask_info(H, Sid, VMWhat, MWhat, Item, M, R),
        R
    end);
run_step({session_info, What}, R) ->
    {VMWhat, MWhat} = resolve_what(What, R),
    ask_session_info(VMWhat, MWhat, R),
    R;
run_step(_, R) ->
    R.

tracer(0, #{sink := Sink}) -> {Sink, 1};
tracer(1, #{counter := C}) -> {{tracekit_count, C}, 2};
tracer(2, _) -> {bogus_tracer, 3}.

%% F(Index, Session) on the session that index I picks; with I >= 4 the
%% session is named by its weak ref {Name, WeakId} instead of its handle.
with_session(I, R, F) ->
    case session(I, R) of
        none -> count(skipped_no_session), R;
        {Index, S = #ses{weak = W}} when I >= 4 -> F(Index, S#ses{handle = W});
        {Index, S} -> F(Index, S)
    end.

%% process/4 or port/4. garbage_collection (also within `all') is only
%% used in the first session: GC tracing of one process in two sessions
%% crashes OTP 27-29.
trace_step(Api, I, Spec, How, Flags0, R = #run{model = M}) ->
    with_session(I, R, fun(Index, #ses{handle = H, sid = Sid}) ->
        Flags = case Index of
                    0 -> Flags0;
                    _ -> [F || F <- Flags0, F =/= garbage_collection, F =/= all]
                end,
        {VMSpec, MSpec} = resolve_spec(Spec, R),
        CountKey = case Api of process -> process_count; port -> port_count end,
        Pre = erlang:system_info(CountKey),
        VM = vm(fun() -> trace:Api(H, VMSpec, How, Flags) end),
        Post = erlang:system_info(CountKey),
        MFun = case Api of process -> session_process; port -> session_port end,
        Model = tracekit_model:MFun(M, Sid, MSpec, How, Flags, Pre),
        case {VM, Model} of
            {N, K} when is_integer(N), is_integer(K), Pre =/= Post ->
                count(count_raced); % a process or port came or went meanwhile
            _ ->
                same({Api, Spec, How, Flags}, VM, Model)
        end,
        R
    end).

resolve_spec({proc, I}, #run{procs = Ps}) ->
    {P, T} = nth(I, Ps),
    {P, T};
resolve_spec({port, I}, #run{ports = []} = R) ->
    resolve_spec({proc, I}, R);
resolve_spec({port, I}, #run{ports = Ports}) ->
    nth(I, Ports);
resolve_spec(Atom, _) ->
    {Atom, Atom}.

resolve_what({func, K}, #run{funcs = Funcs}) ->
    MFA = case K rem (length(Funcs) + 1) of
              0 -> {?FUNS, nope, 1};
              N -> element(1, lists:nth(N, Funcs))
          end,
    {MFA, MFA};
resolve_what(What, R) ->
    resolve_spec(What, R).

%% Match specifications by key.
ms_term({ms, 1}) -> [{'_', [], [{return_trace}]}];
ms_term({ms, 2}) -> [{'_', [], [{message, false}]}];
ms_term({ms, 3}) -> [{['_', '_'], [], []}];
ms_term({ms, 4}) -> [{['_', '_', '_'], [], []}];
ms_term(bad_ms) -> [bogus];
ms_term(Other) -> Other.

ms_arg(bad_ms) -> bad;
ms_arg(Other) -> Other.

ms_key(Term) ->
    case [K || K <- [1, 2, 3, 4], ms_term({ms, K}) =:= Term] of
        [K] -> {ms, K};
        [] -> Term
    end.

%%% ---- answers ---------------------------------------------------------------------

vm(F) ->
    try F()
    catch error:badarg -> badarg
    end.

same(_, X, X) -> count(comparisons), count_answer(X), ok;
same(What, VM, Model) -> mismatch(What, VM, Model).

%% Statistics of a run, to see what the sequences exercised.
count(Key) ->
    case get(tk_stats) of
        undefined -> ok;
        Stats -> put(tk_stats, maps:update_with(Key, fun(N) -> N + 1 end, 1, Stats))
    end.

count_answer(badarg) -> count(badarg_answers);
count_answer(N) when is_integer(N), N > 0 -> count(positive_counts);
count_answer(_) -> ok.

mismatch(What, VM, Model) ->
    throw({mismatch, #{question => What, vm => VM, model => Model}}).

%% A VM answer of trace:info/3 in the model's terms.
norm(undefined, _) -> undefined;
norm(badarg, _) -> badarg;
norm({Key, V}, R) when Key =:= tracer; Key =:= meta ->
    {Key, norm_tracer(V, R)};
norm({Key, V}, _) when Key =:= match_spec; Key =:= meta_match_spec ->
    {Key, ms_key(V)};
norm({Key, V}, _) when (Key =:= call_time orelse Key =:= call_memory),
                       is_list(V) ->
    {Key, call_data};
norm({all, L}, R) when is_list(L) ->
    {all, [norm(I, R) || I <- L]};
norm(Other, _) ->
    Other.

norm_tracer(Pid, #run{ctx = #{sink := Pid}}) -> {tracer, 1};
norm_tracer({tracekit_count, C}, #run{ctx = #{counter := C}}) -> {tracer, 2};
norm_tracer(Other, _) -> Other.

%% Other processes may call lists:seq/2,3: their call counts are not the
%% model's to know.
count_free({{lists, _, _}, {Key, N}}) when Key =:= call_count, is_integer(N) ->
    {Key, count};
count_free({{lists, _, _} = F, {all, L}}) when is_list(L) ->
    {all, [element(2, count_free({F, I})) || I <- L]};
count_free({_, A}) ->
    A.

ask_info(H, Sid, VMWhat, MWhat, Item, M, R) ->
    VM = norm(vm(fun() -> trace:info(H, VMWhat, Item) end), R),
    Model = tracekit_model:session_info(M, Sid, MWhat, Item),
    same({info, Sid, MWhat, Item}, count_free({VMWhat, VM}),
         count_free({VMWhat, Model})).

ask_session_info(VMWhat, MWhat, R = #run{model = M}) ->
    VM = case vm(fun() -> trace:session_info(VMWhat) end) of
             L when is_list(L) -> ours(L, R);
             Other -> Other
         end,
    same({session_info, MWhat}, VM,
         tracekit_model:session_session_info(M, MWhat)).

%% The sessions of this run (weak ids counted from its first session) and
%% the legacy session, in the VM's order.
ours(L, #run{sessions = Ss, base = Base}) ->
    Mine = [{N, W} || #ses{weak = {N, W}} <- Ss],
    [case S of
         {legacy, default} -> S;
         {N, W} -> {N, W - Base}
     end || S <- L, S =:= {legacy, default} orelse lists:member(S, Mine)].

%% After a destroy the VM strips the session's refs in its trace cleaner
%% process: wait until every live process shows the model's flags.
wait_cleaner(R) ->
    wait_until(fun() -> unions_agree(R) end, 10000).

unions_agree(#run{model = M, procs = Ps}) ->
    lists:all(fun({P, T}) ->
                      case process_info(P, trace) of
                          undefined -> true;
                          {trace, U} -> U =:= tracekit_model:session_union(M, T)
                      end
              end, Ps).

%% Every info answer about every session, tracee, function and event.
snapshot(R = #run{model = M, sessions = Ss, procs = Ps, ports = Ports,
                  funcs = Funcs}) ->
    Tracees = Ps ++ Ports,
    Fns = [MFA || {MFA, _} <- Funcs] ++ [{?FUNS, nope, 1}],
    lists:foreach(
      fun(#ses{handle = H, sid = Sid}) ->
              case tracekit_model:session_info(M, Sid, new, flags) of
                  badarg ->
                      ask_info(H, Sid, new, new, flags, M, R);
                  _ ->
                      [ask_info(H, Sid, V, T, Item, M, R)
                       || {V, T} <- Tracees, Item <- [flags, tracer, traced]],
                      [ask_info(H, Sid, W, W, Item, M, R)
                       || W <- [new, new_ports], Item <- [flags, tracer, all]],
                      [ask_info(H, Sid, E, E, Item, M, R)
                       || E <- [send, 'receive'], Item <- [match_spec, flags]],
                      [ask_info(H, Sid, on_load, on_load, Item, M, R)
                       || Item <- [all, traced, match_spec, meta,
                                   meta_match_spec, call_count, call_time,
                                   call_memory, flags]],
                      [ask_info(H, Sid, F, F, Item, M, R)
                       || F <- Fns, Item <- [all, traced, match_spec, meta,
                                             meta_match_spec, call_count,
                                             call_time, call_memory, flags]]
              end
      end, Ss),
    [ask_session_info(W, W, R)
     || W <- [all, new, new_ports, on_load, send, 'receive']],
    [ask_session_info(V, T, R) || {V, T} <- Tracees],
    [ask_session_info(F, F, R) || F <- Fns],
    lists:foreach(
      fun({P, T}) ->
              VM = case process_info(P, trace) of
                       {trace, U} -> U;
                       undefined -> undefined
                   end,
              same({union, T}, VM, tracekit_model:session_union(M, T))
      end, Ps),
    ok.
