%% @doc One trace started by {@link tracekit}: the process that owns its
%% trace session and ring, drains the ring, applies the limits and prints
%% (or collects) the events. With the `file' option the session's tracer
%% is a {@link tracekit_file} instead, whose writer applies the same
%% limits; this process then only watches its counters. With `nodes', a
%% {@link tracekit_agent} on each node owns that node's session and ring,
%% and this process merges their events by time ({@link tracekit_cluster})
%% and applies the limits to the merged stream.
%%
%% The traced processes only write into the ring (or the file's buffers);
%% everything else happens here. The trace ends at a limit, on request, or
%% when the process that started it exits; then the session is destroyed
%% and the ring (or file) closed, and the summary is printed or sent.
-module(tracekit_runner).

-export([start/2, event_time/1]).

-export_type([request/0, summary/0]).

%% What to trace, already checked by tracekit. (With `nodes', processes
%% may be pids of any node traced, and names, looked up on each.)
-type request() ::
        #{kind := calls | messages | procs,
          procs := all | new | existing | [pid() | atom()],
          calls => [{tracekit_spec:call(), [tracekit_spec:mfa_pattern()]}],
          text := unicode:chardata(),
          %% Processes of this node (the printer's) never traced.
          exclude => [pid()]}.
-type summary() :: #{reason := term(), shown := non_neg_integer(),
                     dropped := non_neg_integer(), events => [tuple()],
                     file => file:name_all(), files => [file:filename_all()],
                     nodes => #{node() => node_summary()},
                     clocks => #{node() => {integer(), non_neg_integer()}}}.
-type node_summary() :: #{shown := non_neg_integer(), dropped := non_neg_integer(),
                          state := closed | {down, term()}}.

-define(BATCH, 1000).
-define(IDLE_MS, 10).
%% How long the io device may take to print a line. One that does not
%% answer in this time (a process that is not an io device, say) ends
%% the trace: it must not hold the trace, or whoever waits for it, for
%% ever.
-define(PRINT_MS, 5000).
%% How long the user's format fun may take for a line (tracekit_printer).
-define(FORMAT_MS, 5000).
%% How long the nodes of a cluster trace may take to hand over their last
%% events once tracing stops.
-define(CLOSE_MS, 10000).

%% Where the session's tracer puts the events: a ring drained here, a
%% trace file (its path as given), or the agents of several nodes.
-type sink() :: {ring, tracekit_ring:ring()}
              | {file, tracekit_file:file(), file:name_all()}
              | {cluster, tracekit_cluster:cluster()}.

-record(st, {caller :: pid(),
             caller_mon :: reference(),
             session :: trace:session() | undefined,
             sink :: sink(),
             opts :: map(),
             limits :: tracekit_limits:limits(),
             deadline :: integer() | infinity,
             calls = [] :: [tracekit_spec:call()],
             printer :: tracekit_printer:state(),
             open = true :: boolean(),
             io_ok = true :: boolean(),
             reason = undefined :: term(),
             over = 0 :: non_neg_integer(),
             collected = [] :: [tuple()],
             waiters = [] :: [pid()],
             %% Of a cluster trace: events shown and over, per node.
             per_node = #{} :: #{node() => {non_neg_integer(), non_neg_integer()}}}).

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

%% @doc The time of an event in microseconds: its timestamp, or now for
%% one without.
-spec event_time(tuple()) -> integer().
event_time(E) ->
    case element(tuple_size(E), E) of
        {Mega, Sec, Micro} when is_integer(Mega), is_integer(Sec), is_integer(Micro) ->
            (Mega * 1000000 + Sec) * 1000000 + Micro;
        _ ->
            erlang:system_time(microsecond)
    end.

%%% Start ----------------------------------------------------------------------

init(Caller, Ref, Req, Opts0) ->
    put('$tracekit', Caller),
    CallerMon = monitor(process, Caller),
    Opts = case Opts0 of
               #{nodes := all} -> Opts0#{nodes := [node() | nodes()]};
               _ -> Opts0
           end,
    #{max_events := Max, rate := Rate, max_time := Time} = Opts,
    %% The printer reads the records it knows of and loads the code that
    %% prints a line before tracing starts, so that neither is traced.
    Printer = printer(Req, Opts),
    tracekit_setup:mark_own(tracekit_printer:processes(Printer)),
    case start_tracing(Req#{exclude => tracekit_printer:processes(Printer)}, Opts) of
        {ok, Session, Sink} ->
            Deadline = case Time of
                           infinity -> infinity;
                           _ -> erlang:monotonic_time(millisecond) + Time
                       end,
            St = #st{caller = Caller, caller_mon = CallerMon, session = Session,
                     sink = Sink, opts = Opts, printer = Printer,
                     limits = tracekit_limits:new(Max, Rate),
                     deadline = Deadline,
                     calls = [C || {C, _} <- maps:get(calls, Req, [])]},
            case print(St, header(Req, Opts, Sink)) of
                #st{io_ok = true} = St1 ->
                    Caller ! {Ref, ok},
                    loop(St1);
                #st{} ->
                    _ = stop_tracing(St),
                    Io = maps:get(io, Opts, standard_io),
                    Caller ! {Ref, {error, {bad_option, {io, Io},
                                            lists:flatten(io_lib:format(
                                              "io: ~0tP did not print within ~w ms; "
                                              "is it an io device?", [Io, 5, ?PRINT_MS]))}}}
            end;
        {error, _} = E ->
            Caller ! {Ref, E}
    end.

%% Records (of the functions traced, and the modules the events show),
%% short references and colours when the lines are printed.
printer(Req, #{print := true} = Opts) when not is_map_key(file, Opts) ->
    tracekit_printer:new(Opts, lists:usort([M || {#{module := M}, _} <- maps:get(calls, Req, [])]));
printer(_Req, Opts) ->
    tracekit_printer:new((maps:without([records, short_refs, format], Opts))#{colour => false}, []).

start_tracing(Req, #{nodes := Nodes} = Opts) ->
    case tracekit_cluster:start(Nodes, Req, Opts) of
        {ok, C} -> {ok, undefined, {cluster, C}};
        {error, {bad_node, N, {file, Path, Posix}}} when N =:= node() -> file_error(Path, Posix);
        {error, _} = E -> E
    end;
start_tracing(Req, Opts) ->
    case open_sink(Opts) of
        {ok, Sink} ->
            Session = trace:session_create(tracekit, tracer(Sink), []),
            case tracekit_setup:session(Session, Req, Opts, [self()]) of
                ok ->
                    {ok, Session, Sink};
                {error, _} = E ->
                    _ = trace:session_destroy(Session),
                    ok = close_sink(Sink),
                    E
            end;
        {error, _} = E ->
            E
    end.

open_sink(#{file := Path, ring_size := Size, payload := Payload,
            max_events := Max, rate := Rate}) ->
    case tracekit_file:new(#{path => Path, buffer => Size, payload => Payload,
                             max_events => Max, rate => Rate}) of
        {ok, File} ->
            {ok, {file, File, Path}};
        {error, {file, _, Posix}} ->
            file_error(Path, Posix);
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

file_error(Path, Posix) ->
    {error, {bad_option, {file, Path},
             lists:flatten(io_lib:format("file: cannot create ~tp: ~ts (~w)",
                                         [Path, file:format_error(Posix), Posix]))}}.

tracer({ring, Ring}) -> {tracekit_ring, Ring};
tracer({file, File, _}) -> {tracekit_file, File}.

close_sink({ring, Ring}) -> tracekit_ring:close(Ring);
close_sink({file, File, _}) -> tracekit_file:close(File).

header(#{kind := Kind, text := Text}, Opts, Sink) ->
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
     case Sink of
         {cluster, C} -> on_nodes(C);
         _ -> ""
     end,
     case Opts of
         #{file := Path} -> io_lib:format(" into ~ts", [filename:flatten(Path)]);
         _ -> ""
     end,
     case Limits of [] -> ""; _ -> [" (stops after ", Limits, ")"] end].

%% The nodes, and how far apart their clocks may be from what was
%% measured: the merge by time is that exact.
on_nodes(C) ->
    Offsets = tracekit_cluster:offsets(C),
    Err = lists:max([E || {_, E} <- maps:values(Offsets)]),
    [" on ", lists:join(", ", [atom_to_list(N) || N <- lists:sort(maps:keys(Offsets))]),
     io_lib:format(" (clocks known within ~w us)", [Err])].

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

poll(#st{sink = {cluster, C}} = St) ->
    idle(St#st{sink = {cluster, tracekit_cluster:request(C)}},
         erlang:monotonic_time(millisecond));
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
            finish(caller_down, St);
        Msg when element(1, Msg) =:= tracekit_agent; element(1, Msg) =:= 'DOWN' ->
            from_cluster(Msg, St)
    after Wait ->
            poll(St)
    end.

%%% A cluster trace -----------------------------------------------------------

from_cluster(Msg, #st{sink = {cluster, C}} = St) ->
    case tracekit_cluster:handle(Msg, C) of
        {ok, C1} ->
            merged(St#st{sink = {cluster, C1}});
        {down, Node, Why, C1} ->
            St1 = print(St#st{sink = {cluster, C1}},
                        io_lib:format("tracekit: node ~ts is gone (~0tP); the other nodes "
                                      "go on", [atom_to_list(Node), Why, 5])),
            case tracekit_cluster:finished(C1) of
                true -> finish(nodes_down, St1);
                false -> merged(St1)
            end;
        ignore ->
            loop(St)
    end;
from_cluster(_Msg, St) ->
    loop(St).

%% What the merge lets go, through the limits; then the end of the trace
%% when a limit is reached.
merged(#st{sink = {cluster, C}} = St) ->
    St1 = take_merged(St, C),
    Now = erlang:monotonic_time(millisecond),
    if
        not St1#st.open ->
            finish(St1#st.reason, St1);
        St1#st.deadline =/= infinity, Now >= St1#st.deadline ->
            finish({max_time, maps:get(max_time, St1#st.opts)}, St1);
        true ->
            case file_limit(St1) of
                none -> loop(St1);
                Limit -> finish(Limit, St1)
            end
    end.

%% With `file', each node's writer applies the limits to its own file;
%% the trace ends when one of them reached one, or when the nodes wrote
%% max_events together.
file_limit(#st{sink = {cluster, C}, opts = #{file := _, max_events := Max}}) ->
    Stats = maps:values(tracekit_cluster:file_stats(C)),
    Written = lists:sum([W || #{written := W} <- Stats]),
    case [L || #{limit := L} <- Stats, L =/= none] of
        [L | _] -> L;
        [] when Max =/= infinity, Written >= Max -> {max_events, Max};
        [] -> none
    end;
file_limit(_) ->
    none.

take_merged(#st{printer = P} = St, C) ->
    {Items, C1} = tracekit_cluster:take(C),
    handle_merged(Items, St#st{sink = {cluster, C1},
                               printer = tracekit_printer:add_names(tracekit_cluster:names(C1), P)}).

handle_merged([], St) ->
    St;
handle_merged([{Node, T, E} | Rest], #st{per_node = PN} = St) ->
    {Shown0, Over0} = maps:get(Node, PN, {0, 0}),
    St1 = event(E, T, Node, St),
    Shown = Shown0 + tracekit_limits:shown(St1#st.limits) - tracekit_limits:shown(St#st.limits),
    Over = Over0 + St1#st.over - St#st.over,
    handle_merged(Rest, St1#st{per_node = PN#{Node => {Shown, Over}}}).

%% Stops tracing on every node, and takes in their last events.
close_cluster(#st{sink = {cluster, C}} = St) ->
    drain_cluster(St#st{sink = {cluster, tracekit_cluster:close(C)}},
                  erlang:monotonic_time(millisecond) + ?CLOSE_MS).

drain_cluster(#st{sink = {cluster, C0}} = St0, Until) ->
    C = tracekit_cluster:request(C0),
    St = St0#st{sink = {cluster, C}},
    case tracekit_cluster:finished(C) of
        true ->
            St;
        false ->
            Left = Until - erlang:monotonic_time(millisecond),
            Wait = max(0, min(?IDLE_MS, Left)),
            receive
                Msg when element(1, Msg) =:= tracekit_agent; element(1, Msg) =:= 'DOWN' ->
                    case tracekit_cluster:handle(Msg, C) of
                        ignore -> drain_cluster(St, Until);
                        {ok, C1} -> drain_cluster(take_merged(St, C1), Until);
                        {down, _, _, C1} -> drain_cluster(take_merged(St, C1), Until)
                    end
            after Wait ->
                    case Left > 0 of
                        true -> drain_cluster(St, Until);   % ask again
                        false -> St
                    end
            end
    end.

%%% Events --------------------------------------------------------------------

handle([], St) ->
    St;
handle([E | Es], St) ->
    handle(Es, event(E, event_time(E), undefined, St)).

event(_E, _T, _Node, #st{open = false, over = O} = St) ->
    St#st{over = O + 1};
event(E, T, Node, St) ->
    case hidden(E, St) of
        true ->
            St;
        false ->
            case tracekit_limits:event(T, St#st.limits) of
                {show, L} ->
                    show(E, Node, St#st{limits = L});
                {last, Why, L} ->
                    (show(E, Node, St#st{limits = L}))#st{open = false, reason = Why};
                {stop, Why, L} ->
                    St#st{limits = L, open = false, reason = Why, over = St#st.over + 1}
            end
    end.

%% Return values of functions whose specs asked only for exceptions (the
%% VM reports both with exception_trace).
hidden(E, #st{calls = Calls}) when element(3, E) =:= return_from,
                                   tuple_size(element(4, E)) =:= 3 ->
    not tracekit_spec:shows_return(Calls, element(4, E));
hidden(_, _) ->
    false.

show(E, _Node, #st{opts = #{print := false}, collected = C} = St) ->
    St#st{collected = [E | C]};
show(E, Node, #st{opts = Opts, printer = P} = St) ->
    St1 = case tracekit_printer:line(E, Node, Opts, P) of
              {timeout, P1} ->
                  StT = print(St#st{printer = P1},
                              io_lib:format("tracekit: the format fun did not return a "
                                            "line within ~w ms", [?FORMAT_MS])),
                  StT#st{open = false,
                         reason = first_reason(StT#st.reason, {format_timeout, ?FORMAT_MS})};
              {Line, P1} ->
                  print(St#st{printer = P1}, Line)
          end,
    %% Slow lines (a slow format fun or io device) do not hold the trace
    %% past its time limit, nor keep a stop or the caller's exit waiting
    %% for the rest of a batch.
    St2 = case St1#st.deadline of
              D when D =/= infinity, St1#st.open ->
                  case erlang:monotonic_time(millisecond) >= D of
                      true -> St1#st{open = false,
                                     reason = {max_time, maps:get(max_time, St1#st.opts)}};
                      false -> St1
                  end;
              _ ->
                  St1
          end,
    CM = St2#st.caller_mon,
    case St2#st.open of
        true ->
            receive
                {stop, From} ->
                    St2#st{open = false, reason = stopped, waiters = [From | St2#st.waiters]};
                {'DOWN', CM, process, _, _} ->
                    St2#st{open = false, reason = caller_down}
            after 0 ->
                    St2
            end;
        false ->
            St2
    end.

first_reason(undefined, Why) -> Why;
first_reason(Reason, _) -> Reason.

%% Prints a line, unless the trace collects or its io device stopped
%% answering (then the trace ends).
print(#st{opts = #{print := false}} = St, _Line) ->
    St;
print(#st{io_ok = false} = St, _Line) ->
    St;
print(#st{opts = Opts, reason = Reason} = St, Line) ->
    case tracekit_printer:put_chars(maps:get(io, Opts, standard_io), [Line, $\n], ?PRINT_MS) of
        ok -> St;
        timeout -> St#st{io_ok = false, open = false,
                         reason = case Reason of
                                      undefined -> {io_timeout, ?PRINT_MS};
                                      _ -> Reason
                                  end}
    end.

%%% The end -------------------------------------------------------------------

-spec finish(term(), #st{}) -> no_return().
finish(Reason0, St0) ->
    {St, Summary0} = summary(Reason0, stop_tracing(St0)),
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

%% No more events: the session destroyed, the ring or file closed (on
%% every node).
stop_tracing(#st{sink = {cluster, _}} = St) ->
    close_cluster(St);
stop_tracing(#st{session = S, sink = Sink} = St) ->
    _ = trace:session_destroy(S),
    ok = close_sink(Sink),
    St.

%% After the tracer is closed: what was shown (or written), what was not.
summary(Reason0, #st{sink = {ring, R}} = St0) ->
    St = handle(tracekit_ring:drain(R), St0),
    #{dropped := RingDropped, buffered := Buffered} = tracekit_ring:stats(R),
    {St, #{reason => reason(Reason0, St),
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
           file => Path}};
summary(Reason0, #st{sink = {cluster, C}, opts = #{file := Dir}} = St) ->
    {Files, Missing} = tracekit_cluster:fetch(C, Dir),
    ok = tracekit_cluster:done(C),
    Stats = tracekit_cluster:file_stats(C),
    Nodes = maps:map(fun(N, #{state := S, dropped := D}) ->
                             W = maps:get(written, maps:get(N, Stats), 0),
                             State = case lists:keyfind(N, 1, Missing) of
                                         {N, Why} when S =:= closed -> {not_fetched, Why};
                                         _ -> S
                                     end,
                             #{shown => W, dropped => D, state => State}
                     end, tracekit_cluster:nodes_summary(C)),
    {St, #{reason => Reason0,
           shown => lists:sum([S || #{shown := S} <- maps:values(Nodes)]),
           dropped => lists:sum([D || #{dropped := D} <- maps:values(Nodes)]),
           file => Dir, files => lists:sort(Files), nodes => Nodes,
           clocks => tracekit_cluster:offsets(C)}};
summary(Reason0, #st{sink = {cluster, C}, per_node = PN} = St) ->
    ok = tracekit_cluster:done(C),
    Nodes = maps:map(fun(N, #{state := S, dropped := D}) ->
                             {Shown, Over} = maps:get(N, PN, {0, 0}),
                             #{shown => Shown, dropped => D + Over, state => S}
                     end, tracekit_cluster:nodes_summary(C)),
    {St, #{reason => reason(Reason0, St),
           shown => tracekit_limits:shown(St#st.limits),
           dropped => lists:sum([D || #{dropped := D} <- maps:values(Nodes)]),
           nodes => Nodes, clocks => tracekit_cluster:offsets(C)}}.

%% A limit reached while the trace was ending is the reason.
reason(Reason0, #st{reason = undefined}) -> Reason0;
reason(_, #st{reason = Limit}) -> Limit.
