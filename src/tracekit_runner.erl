%% @doc One trace started by {@link tracekit}: the process that owns its
%% trace session and ring, drains the ring, applies the limits and prints
%% (or collects) the events. With the `file' option the session's tracer
%% is a {@link tracekit_file} instead, whose writer applies the same
%% limits; this process then only watches its counters.
%%
%% The traced processes only write into the ring (or the file's buffers);
%% everything else happens here. The trace ends at a limit, on request, or
%% when the process that started it exits; then the session is destroyed
%% and the ring (or file) closed, and the summary is printed or sent.
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
                     dropped := non_neg_integer(), events => [tuple()],
                     file => file:name_all()}.

-define(BATCH, 1000).
-define(IDLE_MS, 10).
%% How long the io device may take to print a line. One that does not
%% answer in this time (a process that is not an io device, say) ends
%% the trace: it must not hold the trace, or whoever waits for it, for
%% ever.
-define(PRINT_MS, 5000).

%% Where the session's tracer puts the events: a ring drained here, or a
%% trace file (its path as given).
-type sink() :: {ring, tracekit_ring:ring()} | {file, tracekit_file:file(), file:name_all()}.

-record(st, {caller :: pid(),
             caller_mon :: reference(),
             session :: trace:session(),
             sink :: sink(),
             opts :: map(),
             limits :: tracekit_limits:limits(),
             deadline :: integer() | infinity,
             calls = [] :: [tracekit_spec:call()],
             names = #{} :: #{pid() => atom()},
             open = true :: boolean(),
             io_ok = true :: boolean(),
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
    case open_sink(Opts) of
        {ok, Sink} ->
            init(Caller, Ref, CallerMon, Sink, Req, Opts);
        {error, _} = E ->
            Caller ! {Ref, E}
    end.

open_sink(#{file := Path, ring_size := Size, payload := Payload,
            max_events := Max, rate := Rate}) ->
    case tracekit_file:new(#{path => Path, buffer => Size, payload => Payload,
                             max_events => Max, rate => Rate}) of
        {ok, File} ->
            {ok, {file, File, Path}};
        {error, {file, _, Posix}} ->
            {error, {bad_option, {file, Path},
                     lists:flatten(io_lib:format("file: cannot create ~tp: ~ts (~w)",
                                                 [Path, file:format_error(Posix), Posix]))}};
        {error, {badopt, {rate, R}}} ->
            {error, {bad_option, {rate, R}, "with file, rate is at most "
                     "{1000000, 86400000} (a million events in a day)"}};
        {error, {badopt, O}} ->
            {error, {bad_option, O, "the trace file could not be made with this option"}}
    end;
open_sink(#{ring_size := Size, payload := Payload}) ->
    case tracekit_ring:new(#{size => Size, payload => Payload}) of
        {ok, Ring} ->
            {ok, {ring, Ring}};
        {error, {badopt, O}} ->
            %% tracekit checked the options: only a change of the machine
            %% since (its schedulers) can bring this.
            {error, {bad_option, O, "the ring could not be made "
                     "with these options (see tracekit_ring:limits/0)"}}
    end.

tracer({ring, Ring}) -> {tracekit_ring, Ring};
tracer({file, File, _}) -> {tracekit_file, File}.

close_sink({ring, Ring}) -> tracekit_ring:close(Ring);
close_sink({file, File, _}) -> tracekit_file:close(File).

init(Caller, Ref, CallerMon, Sink, Req, Opts) ->
    #{max_events := Max, rate := Rate, max_time := Time} = Opts,
    Limits = tracekit_limits:new(Max, Rate),
    %% The code that prints a line is loaded before tracing starts, so
    %% that the code server's work for the first line is not traced.
    _ = tracekit_format:event({trace_ts, self(), call, {?MODULE, init, [x]}, os:timestamp()},
                              #{}),
    Session = trace:session_create(tracekit, tracer(Sink), []),
    case setup(Session, Req, Opts) of
        ok ->
            Deadline = case Time of
                           infinity -> infinity;
                           _ -> erlang:monotonic_time(millisecond) + Time
                       end,
            St = #st{caller = Caller, caller_mon = CallerMon, session = Session,
                     sink = Sink, opts = Opts,
                     limits = Limits,
                     deadline = Deadline,
                     calls = [C || {C, _} <- maps:get(calls, Req, [])]},
            case print(St, header(Req, Opts)) of
                #st{io_ok = true} = St1 ->
                    Caller ! {Ref, ok},
                    loop(St1);
                #st{} ->
                    Io = maps:get(io, Opts, standard_io),
                    stop_tracing(Session, Sink),
                    Caller ! {Ref, {error, {bad_option, {io, Io},
                                            lists:flatten(io_lib:format(
                                              "io: ~0tP did not print within ~w ms; "
                                              "is it an io device?", [Io, 5, ?PRINT_MS]))}}}
            end;
        {error, _} = E ->
            stop_tracing(Session, Sink),
            Caller ! {Ref, E}
    end.

stop_tracing(Session, Sink) ->
    _ = trace:session_destroy(Session),
    ok = close_sink(Sink).

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
            new ->
                _ = trace:process(S, new, true, Flags),
                ok;
            All ->
                _ = trace:process(S, All, true, Flags),
                lists:foreach(fun(P) -> untrace(S, P) end, printing_path(Opts))
        end
    catch
        throw:{dead, P} ->
            {error, {bad_process, P, "the process is not alive"}}
    end.

untrace(S, P) ->
    try trace:process(S, P, false, [all])
    catch error:badarg -> 0                     % exited meanwhile
    end.

trace_proc(S, P, Flags) ->
    try trace:process(S, P, true, Flags) of
        _ -> ok
    catch
        error:badarg -> throw({dead, P})
    end.

%% The processes that printing a line goes through, which are never
%% traced (each line would make events, shown in more lines): this
%% process; the io device and the group leaders it hands the output on
%% to; the terminal's processes: user_drv with its writer and reader,
%% user, standard_error and its writer (OTP 29); and the VM's dirty
%% process signal handlers, which get a message for each signal to a
%% process that runs a dirty NIF, as the terminal's writer does while it
%% writes (OTP 27). Those of another node are not traced here anyway.
printing_path(Opts) ->
    Io = io_pid(maps:get(io, Opts, standard_io)),
    Terminal = [whereis(N) || N <- [user_drv, user_drv_writer, user_drv_reader, user,
                                    standard_error, standard_error_writer]],
    lists:usort([self() | leaders([Io], [])] ++ [P || P <- Terminal, is_pid(P)]
                ++ signal_handlers()).

%% The VM starts its system processes first, before any other.
signal_handlers() ->
    [P || P <- lists:sublist(erlang:processes(), 16),
          erlang:process_info(P, initial_call)
              =:= {initial_call, {erts_dirty_process_signal_handler, start, 0}}].

%% Ps and their group leaders, and theirs, and so on (the local ones).
leaders([], Seen) ->
    Seen;
leaders([P | Ps], Seen) when is_pid(P), node(P) =:= node() ->
    case lists:member(P, Seen) of
        true ->
            leaders(Ps, Seen);
        false ->
            case erlang:process_info(P, group_leader) of
                {group_leader, GL} -> leaders([GL | Ps], [P | Seen]);
                undefined -> leaders(Ps, Seen)
            end
    end;
leaders([_ | Ps], Seen) ->
    leaders(Ps, Seen).

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
     case Opts of
         #{file := Path} -> io_lib:format(" into ~ts", [filename:flatten(Path)]);
         _ -> ""
     end,
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

poll(#st{sink = {file, File, _}} = St) ->
    %% The writer applies the limits; this process ends the trace when it
    %% has reached one (or at the time limit).
    Now = erlang:monotonic_time(millisecond),
    case tracekit_file:stats(File) of
        #{limit := none} when St#st.deadline =/= infinity, Now >= St#st.deadline ->
            finish({max_time, maps:get(max_time, St#st.opts)}, St);
        #{limit := none} ->
            idle(St, Now);
        #{limit := Limit} ->
            finish(Limit, St)
    end;
poll(#st{sink = {ring, R}} = St) ->
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
hidden(E, #st{calls = Calls}) when element(3, E) =:= return_from,
                                   tuple_size(element(4, E)) =:= 3 ->
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
    print(St, line(Fun, E));
show(E, #st{opts = Opts} = St) ->
    St1 = learn_names(E, St),
    FOpts = (maps:with([depth, line_length], Opts))#{names => St1#st.names},
    print(St1, line(fun(Ev) -> tracekit_format:event(Ev, FOpts) end, E)).

%% The line that Fun (the user's format fun, or tracekit_format's) makes
%% of an event; when it fails, or what it returns is not text, a line
%% that says so: the trace goes on.
line(Fun, E) ->
    try Fun(E) of
        Line ->
            case text(Line) of
                {ok, Text} -> Text;
                error -> format_failed(E, io_lib:format("it returned ~0tP, which is "
                                                        "not text", [Line, 10]))
            end
    catch
        Class:Reason ->
            format_failed(E, io_lib:format("~tw:~0tP", [Class, Reason, 10]))
    end.

text(Line) ->
    try unicode:characters_to_list(Line) of
        Text when is_list(Text) -> {ok, Text};
        _ -> error
    catch
        error:badarg -> error
    end.

format_failed(E, Why) ->
    io_lib:format("tracekit: cannot format the event ~0tP: ~ts", [E, 10, Why]).

%% Prints a line, unless the trace collects or its io device stopped
%% answering (then the trace ends).
print(#st{opts = #{print := false}} = St, _Line) ->
    St;
print(#st{io_ok = false} = St, _Line) ->
    St;
print(#st{opts = Opts, reason = Reason} = St, Line) ->
    case put_chars(maps:get(io, Opts, standard_io), [Line, $\n]) of
        ok -> St;
        timeout -> St#st{io_ok = false, open = false,
                         reason = case Reason of
                                      undefined -> {io_timeout, ?PRINT_MS};
                                      _ -> Reason
                                  end}
    end.

%% io:put_chars/2 with a time limit (the io protocol's request). A device
%% that is gone takes nothing, as io:put_chars/2 would fail.
put_chars(Io, Chars) ->
    case io_pid(Io) of
        Pid when is_pid(Pid) ->
            Mon = monitor(process, Pid),
            Pid ! {io_request, self(), Mon, {put_chars, unicode, Chars}},
            receive
                {io_reply, Mon, _} -> demonitor(Mon, [flush]), ok;
                {'DOWN', Mon, process, Pid, _} -> ok
            after ?PRINT_MS ->
                    demonitor(Mon, [flush]),
                    timeout
            end;
        undefined ->
            ok
    end.

io_pid(standard_io) -> group_leader();
io_pid(Name) when is_atom(Name) -> whereis(Name);
io_pid(Pid) -> Pid.

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
finish(Reason0, #st{session = S, sink = Sink} = St0) ->
    stop_tracing(S, Sink),
    {St, Summary0} = summary(Reason0, St0),
    Summary = case St#st.opts of
                  #{print := false, file := _} -> Summary0;
                  #{print := false} -> Summary0#{events => lists:reverse(St#st.collected)};
                  _ -> _ = print(St, tracekit_format:summary(Summary0)), Summary0
              end,
    To = case St#st.opts of
             #{print := false} -> [St#st.caller | St#st.waiters];
             _ -> St#st.waiters
         end,
    _ = [P ! {tracekit, self(), done, Summary} || P <- lists:usort(To)],
    exit(normal).

%% After the tracer is closed: what was shown (or written), what was not.
summary(Reason0, #st{sink = {ring, R}} = St0) ->
    St = handle(tracekit_ring:drain(R), St0),
    Reason = case St#st.reason of
                 undefined -> Reason0;
                 Limit -> Limit
             end,
    #{dropped := RingDropped, buffered := Buffered} = tracekit_ring:stats(R),
    {St, #{reason => Reason,
           shown => tracekit_limits:shown(St#st.limits),
           dropped => RingDropped + Buffered + St#st.over}};
summary(Reason0, #st{sink = {file, File, Path}} = St) ->
    %% Closed: the writer has written or counted everything (a limit it
    %% reached while the trace was ending is the reason).
    #{written := Written, dropped := Dropped, over := Over, buffered := Buffered,
      limit := Limit} = tracekit_file:stats(File),
    Reason = case Limit of
                 none -> Reason0;
                 _ -> Limit
             end,
    {St, #{reason => Reason, shown => Written, dropped => Dropped + Over + Buffered,
           file => Path}}.
