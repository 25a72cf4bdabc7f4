%% @doc One trace started by {@link tracekit}: the process that owns its
%% trace session and ring, drains the ring, applies the limits and prints
%% (or collects) the events.
%%
%% The traced processes only write into the ring; everything else happens
%% here. The trace ends at a limit, on request, or when the process that
%% started it exits; then the session is destroyed and the ring closed, and
%% the summary is printed or sent.
-module(tracekit_runner).

-export([start/2]).

-export_type([request/0, summary/0]).

%% What to trace, already checked by tracekit.
-type request() ::
        #{kind := calls | messages | procs,
          procs := all | new | existing | [pid()],
          calls => [{tracekit_spec:call(), [tracekit_spec:mfa_pattern()]}],
          text := unicode:chardata()}.
-type summary() :: #{reason := term(), shown := non_neg_integer(),
                     dropped := non_neg_integer(), events => [tuple()]}.

-define(BATCH, 1000).
-define(IDLE_MS, 10).

-record(st, {caller :: pid(),
             caller_mon :: reference(),
             session :: trace:session(),
             ring :: tracekit_ring:ring(),
             opts :: map(),
             limits :: tracekit_limits:limits(),
             deadline :: integer() | infinity,
             calls = [] :: [tracekit_spec:call()],
             names = #{} :: #{pid() => atom()},
             open = true :: boolean(),
             reason = undefined :: term(),
             over = 0 :: non_neg_integer(),
             collected = [] :: [tuple()],
             waiters = [] :: [pid()]}).

%% @doc Starts a trace for the calling process. Returns when tracing is on
%% (and the header line is printed), or with the reason it could not start.
-spec start(request(), map()) -> {ok, pid()} | {error, term()}.
start(Req, Opts) ->
    Caller = self(),
    Ref = make_ref(),
    {Pid, Mon} = spawn_monitor(fun() -> init(Caller, Ref, Req, Opts) end),
    receive
        {Ref, ok} ->
            demonitor(Mon, [flush]),
            {ok, Pid};
        {Ref, {error, _} = E} ->
            demonitor(Mon, [flush]),
            E;
        {'DOWN', Mon, process, Pid, Why} ->
            {error, {tracer_failed, Why, "the tracing process exited while starting"}}
    end.

init(Caller, Ref, Req, Opts) ->
    put('$tracekit', Caller),
    CallerMon = monitor(process, Caller),
    #{ring_size := Size, payload := Payload} = Opts,
    case tracekit_ring:new(#{size => Size, payload => Payload}) of
        {ok, Ring} ->
            init(Caller, Ref, CallerMon, Ring, Req, Opts);
        {error, {badopt, O}} ->
            %% tracekit checked the options: only a change of the machine
            %% since (its schedulers) can bring this.
            Caller ! {Ref, {error, {bad_option, O, "the ring could not be made "
                                    "with these options (see tracekit_ring:limits/0)"}}}
    end.

init(Caller, Ref, CallerMon, Ring, Req, Opts) ->
    Session = trace:session_create(tracekit, {tracekit_ring, Ring}, []),
    case setup(Session, Req, Opts) of
        ok ->
            #{max_events := Max, rate := Rate, max_time := Time} = Opts,
            Deadline = case Time of
                           infinity -> infinity;
                           _ -> erlang:monotonic_time(millisecond) + Time
                       end,
            St = #st{caller = Caller, caller_mon = CallerMon, session = Session,
                     ring = Ring, opts = Opts,
                     limits = tracekit_limits:new(Max, Rate),
                     deadline = Deadline,
                     calls = [C || {C, _} <- maps:get(calls, Req, [])]},
            print_line(St, header(Req, Opts)),
            Caller ! {Ref, ok},
            loop(St);
        {error, _} = E ->
            _ = trace:session_destroy(Session),
            ok = tracekit_ring:close(Ring),
            Caller ! {Ref, E}
    end.

setup(S, #{kind := Kind, procs := Procs} = Req, Opts) ->
    Flags = case Kind of
                calls -> [call, timestamp];
                messages -> [send, 'receive', timestamp];
                procs -> [procs, timestamp]
            end,
    try
        Scope = maps:get(scope, Opts),
        _ = [trace:function(S, MFA, MS, [Scope])
             || Kind =:= calls,
                {#{match_spec := MS}, MFAs} <- maps:get(calls, Req, []),
                MFA <- MFAs],
        case Procs of
            L when is_list(L) ->
                lists:foreach(fun(P) -> trace_proc(S, P, Flags) end, L);
            All ->
                _ = trace:process(S, All, true, Flags),
                _ = [trace:process(S, P, false, [all])
                     || P <- [self() | io_pid(Opts)], All =/= new],
                ok
        end
    catch
        throw:{dead, P} ->
            {error, {bad_process, P, "the process is not alive"}}
    end.

trace_proc(S, P, Flags) ->
    try trace:process(S, P, true, Flags) of
        _ -> ok
    catch
        error:badarg -> throw({dead, P})
    end.

%% The process that the lines go to.
io_pid(Opts) ->
    case maps:get(io, Opts, standard_io) of
        standard_io -> [group_leader()];
        Io when is_pid(Io) -> [Io];
        Name ->
            case whereis(Name) of
                undefined -> [];
                P -> [P]
            end
    end.

header(#{kind := Kind, text := Text}, Opts) ->
    Limits = lists:join(" or ",
                        [io_lib:format("~w events", [N]) || N <- [maps:get(max_events, Opts)], N =/= infinity]
                        ++ [io_lib:format("~w ms", [T]) || T <- [maps:get(max_time, Opts)], T =/= infinity]
                        ++ [io_lib:format("more than ~w events in ~w ms", [N, Ms])
                            || {N, Ms} <- [maps:get(rate, Opts)]]),
    What = case Kind of
               calls -> "calls to ";
               messages -> "messages of ";
               procs -> "process events of "
           end,
    ["tracekit: tracing ", What, Text,
     case Limits of [] -> ""; _ -> [" (stops after ", Limits, ")"] end].

%%% The loop ------------------------------------------------------------------

loop(#st{caller_mon = CM} = St) ->
    receive
        {stop, From} ->
            finish(stopped, St#st{waiters = [From | St#st.waiters]});
        {wait, From} ->
            loop(St#st{waiters = [From | St#st.waiters]});
        {'DOWN', CM, process, _, _} ->
            finish(caller_down, St)
    after 0 ->
            poll(St)
    end.

poll(#st{ring = R} = St) ->
    Events = tracekit_ring:drain(R, ?BATCH),
    St1 = handle(Events, St),
    Now = erlang:monotonic_time(millisecond),
    if
        not St1#st.open ->
            finish(St1#st.reason, St1);
        St1#st.deadline =/= infinity, Now >= St1#st.deadline ->
            finish({max_time, maps:get(max_time, St1#st.opts)}, St1);
        length(Events) =:= ?BATCH ->
            loop(St1);
        true ->
            idle(St1, Now)
    end.

idle(#st{caller_mon = CM, deadline = D} = St, Now) ->
    Wait = case D of
               infinity -> ?IDLE_MS;
               _ -> max(0, min(?IDLE_MS, D - Now))
           end,
    receive
        {stop, From} ->
            finish(stopped, St#st{waiters = [From | St#st.waiters]});
        {wait, From} ->
            idle(St#st{waiters = [From | St#st.waiters]}, Now);
        {'DOWN', CM, process, _, _} ->
            finish(caller_down, St)
    after Wait ->
            poll(St)
    end.

handle([], St) ->
    St;
handle([_ | Es], #st{open = false, over = O} = St) ->
    handle(Es, St#st{over = O + 1});
handle([E | Es], St) ->
    case hidden(E, St) of
        true -> handle(Es, St);
        false ->
            case tracekit_limits:event(time_us(E), St#st.limits) of
                {show, L} ->
                    handle(Es, show(E, St#st{limits = L}));
                {last, Why, L} ->
                    handle(Es, (show(E, St#st{limits = L}))#st{open = false, reason = Why});
                {stop, Why, L} ->
                    handle(Es, St#st{limits = L, open = false, reason = Why,
                                     over = St#st.over + 1})
            end
    end.

%% Return values of functions whose specs asked only for exceptions (the
%% VM reports both with exception_trace).
hidden(E, #st{calls = Calls}) when element(3, E) =:= return_from ->
    not tracekit_spec:shows_return(Calls, element(4, E));
hidden(_, _) ->
    false.

time_us(E) ->
    case element(tuple_size(E), E) of
        {Mega, Sec, Micro} when is_integer(Mega), is_integer(Sec), is_integer(Micro) ->
            (Mega * 1000000 + Sec) * 1000000 + Micro;
        _ ->
            erlang:monotonic_time(microsecond)
    end.

show(E, #st{opts = #{print := false}, collected = C} = St) ->
    St#st{collected = [E | C]};
show(E, #st{opts = #{format := Fun}} = St) when is_function(Fun, 1) ->
    print_line(St, Fun(E)),
    St;
show(E, #st{opts = Opts} = St) ->
    St1 = learn_names(E, St),
    FOpts = maps:with([depth, line_length], Opts),
    print_line(St1, tracekit_format:event(E, FOpts#{names => St1#st.names})),
    St1.

print_line(#st{opts = #{print := false}}, _Line) ->
    ok;
print_line(#st{opts = Opts}, Line) ->
    Io = maps:get(io, Opts, group_leader()),
    try io:put_chars(Io, [Line, $\n])
    catch _:_ -> ok
    end.

%% Registered names of the processes an event mentions.
learn_names(E, #st{names = Names} = St) ->
    Names1 = case E of
                 {_, P, register, Name} -> Names#{P => Name};
                 {_, P, register, Name, _} -> Names#{P => Name};
                 _ -> lists:foldl(fun name/2, Names, pids(E))
             end,
    St#st{names = Names1}.

pids(E) ->
    [X || X <- lists:sublist(tuple_to_list(E), 2, 4), is_pid(X)].

%% A name is looked up each time (processes register and unregister);
%% the last one known is kept for processes that have exited.
name(P, Names) when node(P) =:= node() ->
    case erlang:process_info(P, registered_name) of
        {registered_name, N} -> Names#{P => N};
        [] -> maps:remove(P, Names);
        undefined -> Names
    end;
name(_P, Names) ->
    Names.

%%% The end -------------------------------------------------------------------

-spec finish(term(), #st{}) -> no_return().
finish(Reason0, #st{session = S, ring = R} = St0) ->
    _ = trace:session_destroy(S),
    ok = tracekit_ring:close(R),
    St = handle(tracekit_ring:drain(R), St0),
    Reason = case St#st.reason of
                 undefined -> Reason0;
                 Limit -> Limit
             end,
    #{dropped := RingDropped, buffered := Buffered} = tracekit_ring:stats(R),
    Summary0 = #{reason => Reason,
                 shown => tracekit_limits:shown(St#st.limits),
                 dropped => RingDropped + Buffered + St#st.over},
    Summary = case St#st.opts of
                  #{print := false} -> Summary0#{events => lists:reverse(St#st.collected)};
                  _ -> print_line(St, tracekit_format:summary(Summary0)), Summary0
              end,
    To = case St#st.opts of
             #{print := false} -> [St#st.caller | St#st.waiters];
             _ -> St#st.waiters
         end,
    _ = [P ! {tracekit, self(), done, Summary} || P <- lists:usort(To)],
    exit(normal).
