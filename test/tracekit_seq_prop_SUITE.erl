%% The seq_trace model mirrored against the VM: PropEr generates scenarios
%% (a few processes, each step one of set_token / get_token / send /
%% receive / print / spawn / link / exit / reset_trace), each runs for real on the
%% VM and on the model (tracekit_model:seq_*), and after every step the
%% return values and the tokens of every live process must be the same;
%% at the end, so must the seq_trace events the system tracer got.
%%
%% A driver process runs the steps one at a time. Workers take commands
%% and report back through tracekit_model:seq_send_untokened/2 (enif_send
%% without a message environment), which carries no seq_trace token: the
%% orchestration leaves every token, clock and event as it is.
-module(tracekit_seq_prop_SUITE).

-include_lib("common_test/include/ct.hrl").
%% The PropEr of the Debian packages has no include files: the property
%% uses the functions behind PropEr's macros.
-import(proper_types, [list/1, frequency/1, integer/2, boolean/0,
                       elements/1]).

-export([all/0, init_per_suite/1, end_per_suite/1, init_per_testcase/2,
         end_per_testcase/2]).
-export([model_matches_vm/1, known_scenarios/1]).
%% Used by PropEr and by hand (rerunning a printed scenario).
-export([prop_model_matches_vm/1, run/2, scenario/0]).

%% Scenarios per run; TK_SEQ_PROP_NUMTESTS asks for more (or fewer).
-define(NUMTESTS, 1000).

all() ->
    [known_scenarios, model_matches_vm].

init_per_suite(Config) ->
    %% Modules the workers call are loaded now: loading one later would
    %% send messages to the code server with a worker's token.
    [{module, _} = code:ensure_loaded(M)
     || M <- [seq_trace, tracekit_model, tracekit_ring, tk_seq_refuse,
              tk_collector, proper, ?MODULE]],
    [{old_tracer, seq_trace:get_system_tracer()} | Config].

end_per_suite(Config) ->
    _ = seq_trace:set_system_tracer(?config(old_tracer, Config)),
    ok.

init_per_testcase(_, Config) ->
    Config.

end_per_testcase(_, _Config) ->
    _ = seq_trace:set_system_tracer(false),
    seq_trace:reset_trace(),
    ok.

%% The system tracer that collects the VM's events, as a parameter of the
%% property: {Name, Start, Collect, Stop}, Start() -> {TracerTerm, State},
%% Collect(State) -> every event so far. The property runs with a
%% tracekit_ring; OTP's process tracer (a collecting process) is the
%% reference the known scenarios also use.
backend(ring) ->
    {ring,
     fun() ->
             {ok, R} = tracekit_ring:new(#{size => 65536}),
             {{tracekit_ring, R}, R}
     end,
     %% drain/1 hands each event out once: keep what was drained.
     fun(R) ->
             Es = get(tk_seq_drained) ++ tracekit_ring:drain(R),
             put(tk_seq_drained, Es),
             Es
     end,
     fun(R) -> erase(tk_seq_drained), tracekit_ring:close(R) end};
backend(collector) ->
    {collector,
     fun() -> C = tk_collector:start(), {C, C} end,
     fun(C) -> tk_collector:events(C) end,
     fun(C) -> tk_collector:stop(C) end}.

%%% ---- test cases ----------------------------------------------------------

model_matches_vm(_Config) ->
    Backend = backend(ring),
    NumTests = case os:getenv("TK_SEQ_PROP_NUMTESTS") of
                   false -> ?NUMTESTS;
                   V -> list_to_integer(V)
               end,
    T0 = erlang:monotonic_time(millisecond),
    erase(tk_seq_stats),
    Result = proper:quickcheck(prop_model_matches_vm(Backend),
                               [{numtests, NumTests}, {max_size, 60},
                                {to_file, user}, long_result]),
    Ms = erlang:monotonic_time(millisecond) - T0,
    {N, Steps, Events} = stats(),
    ct:pal("~b scenarios, ~b steps, ~b VM events compared, ~b ms (~s)",
           [N, Steps, Events, Ms, element(1, Backend)]),
    case Result of
        true ->
            N >= NumTests orelse ct:fail({too_few_scenarios, N}),
            {comment, io_lib:format("~b scenarios, ~b steps, ~b events, ~b ms",
                                    [N, Steps, Events, Ms])};
        [Shrunk] ->
            Why = run(Shrunk, Backend),
            ct:pal("The model disagrees with the VM.~nShrunk scenario:~n~p~n"
                   "Disagreement:~n~p", [Shrunk, Why]),
            ct:fail({model_disagrees, Shrunk, Why});
        Other ->
            ct:fail({quickcheck, Other})
    end.

%% Hand-written scenarios for the behaviours the property must reach, each
%% with the number of events it makes, on the ring and on OTP's process
%% tracer.
known_scenarios(_Config) ->
    Scenarios =
        [%% token_set_get, then a message with every flag: send, receive,
         %% and a print by the receiver, which now has the token
         {{2, accept, [],
           [{set_label, 0, 17}, {set_flag, 0, send, true},
            {set_flag, 0, 'receive', true}, {set_flag, 0, print, true},
            {set_serial, 0, 3, 5}, {send, 0, 1}, {recv, 1, 0},
            {print, 1, hi}]}, 3},
         %% spawn with a token (request and reply sent), a message to
         %% itself, then the parent's counters show in a new token
         {{1, accept, [],
           [{set_flag, 0, send, true}, {spawn, 0, true}, {send, 0, 0},
            {recv, 0, 0}, {set_token_nil, 0}, {set_label, 0, 1}]}, 3},
         %% a linked process dies with a token: its 'EXIT'
         {{1, accept, [],
           [{spawn, 0, true}, {set_flag, 1, send, true}, {exit, 1, boom},
            {recv, 0, 0}]}, 1},
         %% a refusing tracer stops the serials
         {{2, refuse, [],
           [{set_flag, 0, send, true}, {send, 0, 1}, {print, 0, x}]}, 0},
         %% serial wrap, and reset
         {{2, none, [],
           [{set_serial, 0, 576460752303423487, 576460752303423487},
            {send, 0, 1}, {recv, 1, 0}, {reset}, {set_label, 1, 2}]}, 0}],
    [begin
         {_, _, E0} = stats(),
         ok = run(S, backend(B)),
         {_, _, E1} = stats(),
         {S, B, Events} = {S, B, E1 - E0}
     end || B <- [ring, collector], {S, Events} <- Scenarios],
    ok.

stats() ->
    case get(tk_seq_stats) of
        undefined -> {0, 0, 0};
        S -> S
    end.

count(Steps, Events) ->
    {N, S, E} = stats(),
    put(tk_seq_stats, {N + 1, S + Steps, E + Events}).

%%% ---- scenarios -----------------------------------------------------------

prop_model_matches_vm(Backend) ->
    proper:forall(
      scenario(),
      fun(Scenario) ->
              Result = run(Scenario, Backend),
              proper:whenfail(
                fun() -> io:format("Disagreement: ~p~n", [Result]) end,
                fun() -> Result =:= ok end)
      end).

%% {InitialProcesses, Tracer, Traced, Steps}: the processes of Traced
%% (indexes) start with the send, receive and print flags set. Process
%% indexes in steps are taken modulo the live processes (or all processes,
%% for a send's receiver and a queued message), so every list of steps is
%% valid and shrinks well.
scenario() ->
    {integer(2, 4), tracer(), traced(), list(step())}.

traced() ->
    frequency([{3, [0, 1, 2, 3]}, {1, list(integer(0, 3))}]).

tracer() ->
    frequency([{6, accept}, {1, none}, {1, refuse}]).

step() ->
    I = integer(0, 7),
    frequency(
      [{7, {set_flag, I, flag(), frequency([{3, true}, {1, false}])}},
       {2, {set_label, I, label()}},
       {2, {set_serial, I, counter(), counter()}},
       {1, {set_token_nil, I}},
       {1, {set_token_tuple, I, integer(-2, 70), label(), counter(), counter()}},
       {1, {set_bad, I, bad_set()}},
       {2, {get, I, component()}},
       {9, {send, I, I}},
       {1, {send_untokened, I}},
       {9, {recv, I, integer(0, 5)}},
       {3, {print, I, info()}},
       {2, {print2, I, label(), info()}},
       {2, {spawn, I, boolean()}},
       {1, {link, I, I}},
       {1, {exit, I, reason()}},
       {1, {reset}}]).

flag() ->
    frequency([{4, send}, {4, 'receive'}, {3, print}, {1, timestamp},
               {1, strict_monotonic_timestamp}, {1, monotonic_timestamp}]).

label() ->
    elements([0, 17, -3, 1.0, foo, "ab", {x, 1}, <<"b">>, 1 bsl 62]).

counter() ->
    frequency([{8, integer(0, 20)},
               {1, elements([(1 bsl 59) - 1, (1 bsl 59) - 2, -1, -(1 bsl 59),
                             1 bsl 59, 1 bsl 64])}]).

component() ->
    elements([label, serial, send, 'receive', print, timestamp,
              monotonic_timestamp, strict_monotonic_timestamp, spawn, bogus,
              42]).

bad_set() ->
    elements([{bogus, true}, {send, 'maybe'}, {serial, {1, 2, 3}},
              {serial, foo}, {spawn, true}, {sequential_trace_token, foo},
              {42, true}]).

info() ->
    elements([hi, {data, 1}, "text"]).

reason() ->
    elements([normal, boom, kill, {shutdown, x}]).

%%% ---- running a scenario --------------------------------------------------

-record(st, {world, procs = [], links = [], next = 1, steps = 0}).
%% procs: [{Pid, Alive}] in creation order; links: [{A, B}] with A < B
%% (pid order).

%% Runs the scenario on the VM and on the model: ok or the first
%% disagreement.
run({NInit, Tracer, Traced, Steps0}, {_, Start, Collect, Stop}) ->
    Steps = [{set_flag, I, F, true} || I <- lists:usort(Traced),
                                        F <- [send, 'receive', print]] ++ Steps0,
    Self = self(),
    Ref = make_ref(),
    {Driver, Mon} =
        spawn_monitor(fun() ->
                              Self ! {Ref, drive(NInit, Tracer, Steps, Start,
                                                 Collect, Stop)}
                      end),
    receive
        {Ref, {Result, NSteps, NEvents}} ->
            erlang:demonitor(Mon, [flush]),
            count(NSteps, NEvents),
            Result;
        {'DOWN', Mon, process, Driver, Why} ->
            {driver_crashed, Why}
    after 60000 ->
            exit(Driver, kill),
            {timeout, Steps}
    end.

drive(NInit, Tracer, Steps, Start, Collect, Stop) ->
    {TracerState, Cleanup} = set_tracer(Tracer, Start, Stop),
    seq_trace:reset_trace(),
    W = tracekit_model:seq_new(Tracer),
    St0 = lists:foldl(fun(_, St) -> add_root(St) end, #st{world = W},
                      lists:seq(1, NInit)),
    {Result, St} = steps(Steps, St0),
    Expected = tracekit_model:seq_events(W),
    Final = case {Result, Tracer} of
                {ok, accept} ->
                    Got = vm_events(Collect, TracerState, length(Expected)),
                    compare_events(Got, Expected);
                _ ->
                    Result
            end,
    _ = seq_trace:set_system_tracer(false),
    [exit(P, kill) || {P, true} <- St#st.procs],
    Cleanup(),
    seq_trace:reset_trace(),
    {Final, St#st.steps, length(Expected)}.

set_tracer(accept, Start, Stop) ->
    put(tk_seq_drained, []),
    {Term, State} = Start(),
    _ = seq_trace:set_system_tracer(Term),
    {State, fun() -> Stop(State) end};
set_tracer(none, _, _) ->
    _ = seq_trace:set_system_tracer(false),
    {none, fun() -> ok end};
set_tracer(refuse, _, _) ->
    %% Installed, answering discard to enabled(seq_trace, ...). (A closed
    %% tracekit_count would not do: it answers remove to trace_status,
    %% which makes the VM drop it as system tracer.)
    _ = seq_trace:set_system_tracer({tk_seq_refuse, []}),
    {none, fun() -> ok end}.

add_root(#st{world = W, procs = Ps} = St) ->
    Driver = self(),
    Pid = spawn(fun() -> worker_start(Driver) end),
    _ = monitor(process, Pid),
    receive {ready, Pid} -> ok end,
    ok = tracekit_model:seq_add(W, Pid),
    St#st{procs = Ps ++ [{Pid, true}]}.

steps([], St) ->
    {ok, St};
steps([Step | Rest], St0) ->
    St = St0#st{steps = St0#st.steps + 1},
    case step(Step, St) of
        {ok, St1} ->
            case compare_tokens(St1) of
                ok -> steps(Rest, St1);
                Diff -> {{St#st.steps, Step, Diff}, St1}
            end;
        {skip, St1} ->
            steps(Rest, St1);
        {{differ, VM, Model}, St1} ->
            {{St#st.steps, Step, {result, {vm, VM}, {model, Model}}}, St1}
    end.

live(#st{procs = Ps}) -> [P || {P, true} <- Ps].
all_pids(#st{procs = Ps}) -> [P || {P, _} <- Ps].

pick(I, List) -> lists:nth(I rem length(List) + 1, List).

%% Runs Fun in the worker and the model function; compares their results.
both(P, Fun, ModelFun, St) ->
    VM = call(P, Fun),
    Model = try {ok, ModelFun()} catch C:R -> {C, R} end,
    case VM =:= Model of
        true -> {ok, St};
        false -> {{differ, VM, Model}, St}
    end.

step({set_flag, I, Flag, Bool}, St) ->
    P = pick(I, live(St)),
    both(P, fun() -> seq_trace:set_token(Flag, Bool) end,
         fun() -> tracekit_model:seq_set_token(St#st.world, P, Flag, Bool) end,
         St);
step({set_label, I, Label}, St) ->
    P = pick(I, live(St)),
    both(P, fun() -> seq_trace:set_token(label, Label) end,
         fun() -> tracekit_model:seq_set_token(St#st.world, P, label, Label) end,
         St);
step({set_serial, I, Prev, Cur}, St) ->
    P = pick(I, live(St)),
    both(P, fun() -> seq_trace:set_token(serial, {Prev, Cur}) end,
         fun() ->
                 tracekit_model:seq_set_token(St#st.world, P, serial,
                                              {Prev, Cur})
         end, St);
step({set_token_nil, I}, St) ->
    P = pick(I, live(St)),
    both(P, fun() -> seq_trace:set_token([]) end,
         fun() -> tracekit_model:seq_set_token(St#st.world, P, []) end, St);
step({set_token_tuple, I, Flags, Label, Serial, LastCnt}, St) ->
    P = pick(I, live(St)),
    Token = {Flags, Label, Serial, self(), LastCnt},
    both(P, fun() -> seq_trace:set_token(Token) end,
         fun() -> tracekit_model:seq_set_token(St#st.world, P, Token) end, St);
step({set_bad, I, {Comp, Val}}, St) ->
    P = pick(I, live(St)),
    both(P, fun() -> seq_trace:set_token(Comp, Val) end,
         fun() -> tracekit_model:seq_set_token(St#st.world, P, Comp, Val) end,
         St);
step({get, I, Comp}, St) ->
    P = pick(I, live(St)),
    both(P, fun() -> seq_trace:get_token(Comp) end,
         fun() -> tracekit_model:seq_get_token(St#st.world, P, Comp) end, St);
step({send, I, J}, #st{next = N} = St) ->
    P = pick(I, live(St)),
    To = pick(J, all_pids(St)),
    Msg = {scn, N},
    VM = call(P, fun() -> To ! Msg, ok end),
    _ = tracekit_model:seq_send(St#st.world, P, To, Msg),
    check(VM, {ok, ok}, St#st{next = N + 1});
step({send_untokened, I}, #st{next = N} = St) ->
    P = pick(I, live(St)),
    Msg = {untokened, N},
    ok = tracekit_model:seq_send_untokened(P, Msg),
    _ = tracekit_model:seq_deliver(St#st.world, P, Msg),
    {ok, St#st{next = N + 1}};
step({recv, I, K}, St) ->
    P = pick(I, live(St)),
    case tracekit_model:seq_queue(St#st.world, P) of
        [] ->
            {skip, St};
        Queue ->
            {Ref, Msg} = pick(K, Queue),
            VM = call(P, fun() ->
                                 receive M when M =:= Msg -> M
                                 after 5000 -> {not_received, Msg}
                                 end
                         end),
            Model = tracekit_model:seq_receive(St#st.world, P, Ref),
            check(VM, {ok, Model}, St)
    end;
step({print, I, Info}, St) ->
    P = pick(I, live(St)),
    both(P, fun() -> seq_trace:print(Info) end,
         fun() -> tracekit_model:seq_print(St#st.world, P, Info) end, St);
step({print2, I, Label, Info}, St) ->
    P = pick(I, live(St)),
    both(P, fun() -> seq_trace:print(Label, Info) end,
         fun() -> tracekit_model:seq_print(St#st.world, P, Label, Info) end,
         St);
step({spawn, I, Link}, #st{procs = Ps, links = Ls} = St) ->
    P = pick(I, live(St)),
    Driver = self(),
    Start = fun() -> worker_start(Driver) end,
    {ok, Child} = call(P, fun() when Link -> spawn_link(Start);
                             () -> spawn(Start)
                          end),
    _ = monitor(process, Child),
    receive {ready, Child} -> ok end,
    ok = tracekit_model:seq_spawn(St#st.world, P, Child, Link),
    Links = case Link of
                true -> [{min(P, Child), max(P, Child)} | Ls];
                false -> Ls
            end,
    {ok, St#st{procs = Ps ++ [{Child, true}], links = Links}};
step({link, I, J}, #st{links = Ls} = St) ->
    Live = live(St),
    P = pick(I, Live),
    Q = pick(J, Live),
    Link = {min(P, Q), max(P, Q)},
    case P =:= Q orelse lists:member(Link, Ls) of
        true ->
            {skip, St};
        false ->
            VM = call(P, fun() -> link(Q) end),
            ok = tracekit_model:seq_link(St#st.world, P, Q),
            check(VM, {ok, true}, St#st{links = [Link | Ls]})
    end;
step({exit, I, Reason}, #st{links = Ls} = St) ->
    case live(St) of
        [_] ->
            {skip, St};
        Live ->
            P = pick(I, Live),
            Partners = [B || {A, B} <- Ls, A =:= P] ++
                [A || {A, B} <- Ls, B =:= P],
            exit_step(P, Partners, Reason, St)
    end;
step({reset}, St) ->
    seq_trace:reset_trace(),
    true = tracekit_model:seq_reset(St#st.world),
    {ok, St}.

%% With several links the VM sends the exit signals in the order of its
%% link tree (a post-order walk of a tree keyed by pid), which the model
%% does not reproduce: such exits are left out.
exit_step(_P, [_, _ | _], _Reason, St) ->
    {skip, St};
exit_step(P, Partners, Reason, #st{procs = Ps, links = Ls} = St) ->
    ok = tracekit_model:seq_send_untokened(P, {exit, Reason}),
    receive {'DOWN', _, process, P, _} -> ok end,
    %% Each partner traps exits: wait until the 'EXIT' message is in its
    %% queue, so that later steps (reset_trace) find it there.
    [wait_queued(B, {'EXIT', P, Reason}) || B <- Partners],
    ok = tracekit_model:seq_exit(St#st.world, P, Reason),
    Procs = [case Q of P -> {P, false}; _ -> E end || {Q, _} = E <- Ps],
    {ok, St#st{procs = Procs,
               links = [L || {A, B} = L <- Ls, A =/= P, B =/= P]}}.

check(Same, Same, St) -> {ok, St};
check(VM, Model, St) -> {{differ, VM, Model}, St}.

%% The tokens of every live process, read from outside (process_info does
%% not touch them).
compare_tokens(#st{world = W} = St) ->
    Diffs = [{P, {vm, VM}, {model, Model}}
             || P <- live(St),
                VM <- [element(2, process_info(P, sequential_trace_token))],
                Model <- [tracekit_model:seq_get_token(W, P)],
                VM =/= Model],
    case Diffs of
        [] -> ok;
        _ -> {tokens, Diffs}
    end.

wait_queued(P, Msg) ->
    wait_queued(P, Msg, 5000).

wait_queued(P, Msg, 0) ->
    error({not_queued, P, Msg});
wait_queued(P, Msg, N) ->
    {messages, Ms} = process_info(P, messages),
    case lists:member(Msg, Ms) of
        true -> ok;
        false -> timer:sleep(1), wait_queued(P, Msg, N - 1)
    end.

%%% ---- workers ---------------------------------------------------------

worker_start(Driver) ->
    process_flag(trap_exit, true),
    tracekit_model:seq_send_untokened(Driver, {ready, self()}),
    worker(Driver).

worker(Driver) ->
    receive
        {cmd, Ref, Fun} ->
            Result = try {ok, Fun()} catch C:R -> {C, R} end,
            tracekit_model:seq_send_untokened(Driver, {done, Ref, Result}),
            worker(Driver);
        {exit, Reason} ->
            exit(Reason)
    end.

call(P, Fun) ->
    Ref = make_ref(),
    ok = tracekit_model:seq_send_untokened(P, {cmd, Ref, Fun}),
    receive
        {done, Ref, Result} -> Result
    after 10000 ->
            error({worker_timeout, P})
    end.

%%% ---- events --------------------------------------------------------------

%% The VM's events, once as many as the model made have arrived (or a
%% little later, to catch extra ones).
vm_events(Collect, State, Expected) ->
    vm_events(Collect, State, Expected, 200).

vm_events(Collect, State, Expected, Tries) ->
    Es = [normalize(E) || E <- Collect(State)],
    case length(Es) >= Expected orelse Tries =:= 0 of
        true -> Es;
        false -> timer:sleep(1), vm_events(Collect, State, Expected, Tries - 1)
    end.

%% Timestamps become their kind; a spawn's request and reply become
%% {spawn_request, Child} and {spawn_reply, Child}, as the model has them.
normalize({seq_trace, Label, Info}) ->
    {seq_trace, Label, normalize_info(Info)};
normalize({seq_trace, Label, Info, Ts}) ->
    {seq_trace, Label, normalize_info(Info), ts_kind(Ts)}.

ts_kind({_, _, _}) -> timestamp;
ts_kind({_, _}) -> strict_monotonic_timestamp;
ts_kind(N) when is_integer(N) -> monotonic_timestamp.

normalize_info({Kind, Serial, From, To, Msg}) ->
    {Kind, Serial, From, To, normalize_msg(Msg, To)}.

normalize_msg(Msg, To) when is_tuple(Msg), element(1, Msg) =:= spawn_request ->
    {spawn_request, To};
normalize_msg({spawn_reply, _Ref, ok, Child}, _) ->
    {spawn_reply, Child};
normalize_msg(Msg, _) ->
    Msg.

%% Events of one process come in the order it made them; events of
%% different processes in the order of the steps. Compared per process and
%% as a whole.
compare_events(Got, Expected) ->
    case by_owner(Got) =:= by_owner(Expected) andalso
        lists:sort(Got) =:= lists:sort(Expected) of
        true -> ok;
        false -> {events, {vm, Got}, {model, Expected}}
    end.

by_owner(Events) ->
    lists:foldl(fun(E, M) ->
                        maps:update_with(owner(E), fun(L) -> L ++ [E] end,
                                         [E], M)
                end, #{}, Events).

owner(E) ->
    case element(3, E) of
        {'receive', _, _, To, _} -> To;
        {_, _, From, _, _} -> From
    end.
