%% @private
%% @doc One trace: the process that runs it on the calling node. It starts
%% an agent on every node traced ({@link tracekit_nodes}; a trace of this
%% node alone has one agent, here), takes their events merged by time,
%% applies the limits and prints the events, collects them, or keeps the
%% last N of them (the flight recorder of {@link tracekit_cth}). With a
%% trace file the agents' writers apply the limits and this process
%% watches their counters. A latency trace (`latency' options) takes the
%% nodes' histograms instead of events, merges them exactly and prints
%% the table of {@link tracekit_latency_view} every second.
%%
%% The trace ends at a limit, on request ({@link tracekit:stop/1}), or
%% when the process that started it exits (unless `watch' is false); then
%% every node stops tracing, the last events are taken in, and the
%% summary is printed or sent. The shell API ({@link tracekit}) and the
%% Common Test hook start their traces here, with the same agents, merge
%% and ordering.
-module(tracekit_trace).

-export([start/2]).

-export_type([options/0, summary/0, node_summary/0]).

%% The options of {@link tracekit} (checked there), and: `plan' what to
%% trace (its sink and `exclude' are filled in here); `specs' the call
%% specs, for hiding the returns of functions whose spec asked for
%% exceptions only; `header' the kind and text of the header line;
%% `keep' `{last, N}' keeps only the last N events (with `print =>
%% false'); `watch' false: the trace goes on when the process that
%% started it exits; `policy' of the rings; `bad_node' and `follow' as
%% {@link tracekit_nodes} takes them.
-type options() :: map().
%% A latency trace's summary also has `latency' (per function, as {@link
%% tracekit_hist:summary/1} gives it, with `calls_per_second'), `counters'
%% (of tracekit_latency:stats/1, added up over the nodes), `seconds', and
%% with several nodes `latency_nodes' (the same per node); `histograms'
%% (and `histograms_nodes') the histograms themselves; its `shown' is the
%% calls measured, `dropped' the events dropped.
-type summary() :: #{reason := term(), shown := non_neg_integer(),
                     dropped := non_neg_integer(), events => [tuple()],
                     file => file:name_all(), files => [file:filename_all()],
                     nodes => #{node() => node_summary()},
                     clocks => #{node() => {integer(), non_neg_integer()}},
                     latency => #{mfa() => map()}, latency_nodes => map(),
                     histograms => tracekit_latency_view:functions(),
                     histograms_nodes => #{node() => tracekit_latency_view:functions()},
                     counters => map(), seconds => float()}.
-type node_summary() :: #{shown := non_neg_integer(), dropped := non_neg_integer(),
                          state := term()}.

%% How long the io device may take to print a line. One that does not
%% answer in this time (a process that is not an io device, say) ends
%% the trace: it must not hold the trace, or whoever waits for it, for
%% ever.
-define(PRINT_MS, 5000).
%% How long the nodes may take to hand over their last events once
%% tracing stops.
-define(CLOSE_MS, 10000).
%% Lines of a batch are slow when they take longer than this: a stop is
%% then taken after the line being made.
-define(SLOW_MS, 100).
%% How often a latency trace prints its table.
-define(TABLE_MS, 1000).

-record(st, {caller :: pid(),
             caller_mon :: reference() | undefined,
             start_ref :: reference(),
             nodes :: tracekit_nodes:nodes(),
             sink :: ring | file | latency,
             multi :: boolean(),
             opts :: map(),
             limits :: tracekit_limits:limits(),
             deadline :: integer() | infinity,
             specs = [] :: [tracekit_spec:call()],
             printer :: tracekit_printer:state(),
             open = true :: boolean(),
             io_ok = true :: boolean(),
             reason = undefined :: term(),
             collected = [] :: [tuple()],
             kept = queue:new() :: queue:queue({node(), tuple()}),
             kept_len = 0 :: non_neg_integer(),
             waiters = [] :: [pid()],
             %% When the events being shown were taken in (ms).
             batch_at = 0 :: integer(),
             %% Per node: events shown (or kept), and those taken in but
             %% not shown (after a limit, or given way in `keep').
             per_node = #{} :: #{node() => {non_neg_integer(), non_neg_integer()}},
             %% A latency trace: when it started, when the next table is
             %% due, and the counts at the last table (ms).
             lat_start = 0 :: integer(),
             lat_tick = 0 :: integer(),
             lat_prev = {0, #{}} :: {integer(), #{mfa() => non_neg_integer()}},
             %% A slow trace (tracekit:slow/2): the calls being held, and
             %% those kept, written out (newest first).
             slow :: tracekit_slow:state() | undefined,
             slow_lost = #{} :: #{node() => non_neg_integer()},
             captures = [] :: [map()]}).

%% @doc Starts a trace for the calling process. Returns when tracing is on
%% on every node (and the header line is printed), or with the reason it
%% could not start.
-spec start(tracekit_proto:what(), options()) -> {ok, pid()} | {error, term()}.
start(Plan, Opts) ->
    Caller = self(),
    Ref = make_ref(),
    {Pid, Mon} = spawn_monitor(fun() -> init(Caller, Ref, Plan, Opts) end),
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

%%% Start ----------------------------------------------------------------------

init(Caller, Ref, Plan, Opts0) ->
    ok = tracekit_own:mark([]),
    Opts = case Opts0 of
               #{nodes := all} -> Opts0#{nodes := [node() | nodes()]};
               _ -> Opts0
           end,
    %% (tracekit:stop/1 knows a trace by this mark.)
    put('$tracekit', Caller),
    CallerMon = case maps:get(watch, Opts, true) of
                    true -> monitor(process, Caller);
                    false -> undefined
                end,
    %% The printer reads the records it knows of and loads the code that
    %% prints a line before tracing starts, so that neither is traced.
    Printer = printer(Opts),
    ok = tracekit_own:mark(tracekit_printer:processes(Printer)),
    Exclude = tracekit_printer:processes(Printer) ++ printing_path(Opts),
    Sink = sink(Opts),
    NodeOpts = maps:merge(maps:with([bad_node, follow], Opts),
                          case Opts of
                              #{nodes := Ns} -> (maps:with([file], Opts))#{nodes => Ns};
                              _ -> #{nodes => [node()]}
                          end),
    case tracekit_nodes:start(Plan#{sink => Sink, exclude => Exclude}, NodeOpts) of
        {ok, Nodes} ->
            #{max_events := Max, rate := Rate, max_time := Time} = Opts,
            Now = erlang:monotonic_time(millisecond),
            St = #st{caller = Caller, caller_mon = CallerMon, start_ref = Ref,
                     lat_start = Now, lat_tick = Now + ?TABLE_MS, lat_prev = {Now, #{}},
                     nodes = Nodes, sink = maps:get(kind, Sink),
                     multi = is_map_key(nodes, Opts), opts = Opts, printer = Printer,
                     limits = tracekit_limits:new(Max, Rate),
                     deadline = case Time of
                                    infinity -> infinity;
                                    _ -> erlang:monotonic_time(millisecond) + Time
                                end,
                     specs = maps:get(specs, Opts, []),
                     slow = case Opts of
                                #{slow := SlowOpts} -> tracekit_slow:new(SlowOpts);
                                #{} -> undefined
                            end},
            case print(St, header(St)) of
                #st{io_ok = true} = St1 ->
                    Caller ! {Ref, ok},
                    loop(St1);
                #st{} ->
                    _ = close_nodes(St),
                    ok = tracekit_nodes:done(St#st.nodes),
                    Io = maps:get(io, Opts, standard_io),
                    Caller ! {Ref, {error, {bad_option, {io, Io},
                                            text("io: ~0tP did not print within ~w ms; "
                                                 "is it an io device?", [Io, 5, ?PRINT_MS])}}}
            end;
        {error, {file, Path, Posix}} ->
            Caller ! {Ref, file_error(Path, Posix)};
        {error, {badopt, {rate, R}}} when is_map_key(file, Opts) ->
            Caller ! {Ref, {error, {bad_option, {rate, R}, "with file, rate is at most "
                                    "{1000000, 86400000} (a million events in a day)"}}};
        {error, {badopt, O}} ->
            %% tracekit checked the options: only a change of the machine
            %% since (its schedulers) can bring this.
            Caller ! {Ref, {error, {bad_option, O, "the ring could not be made with these "
                                    "options (see tracekit_ring:limits/0)"}}};
        {error, _} = E ->
            Caller ! {Ref, E}
    end.

text(Fmt, Args) -> lists:flatten(io_lib:format(Fmt, Args)).

%% Records (of the functions traced, and the modules the events show),
%% short references and colours when the lines are printed.
printer(#{print := true} = Opts) when not is_map_key(file, Opts) ->
    tracekit_printer:new(Opts, lists:usort([M || #{module := M} <- maps:get(specs, Opts, [])]));
printer(Opts) ->
    tracekit_printer:new((maps:without([records, short_refs, format], Opts))#{colour => false}, []).

%% Where the events are kept on each node.
sink(#{latency := LatOpts}) ->
    #{kind => latency, options => LatOpts};
sink(#{file := Path} = Opts) ->
    #{kind => file, where => {path, Path}, size => maps:get(ring_size, Opts),
      payload => maps:get(payload, Opts), max_events => maps:get(max_events, Opts),
      rate => maps:get(rate, Opts)};
sink(Opts) ->
    #{kind => ring, size => maps:get(ring_size, Opts), payload => maps:get(payload, Opts),
      policy => maps:get(policy, Opts, drop)}.

file_error(Path, Posix) ->
    {error, {bad_option, {file, Path},
             text("file: cannot create ~tp: ~ts (~w)", [Path, file:format_error(Posix), Posix])}}.

%% The processes that printing a line goes through, which are never
%% traced by all (each line would make events, shown in more lines): this
%% process; the io device and the group leaders it hands the output on
%% to; the terminal's processes: user_drv with its writer and reader,
%% user, standard_error and its writer (OTP 29).
printing_path(#{print := true} = Opts) ->
    Io = tracekit_printer:io_pid(maps:get(io, Opts, standard_io)),
    Terminal = [whereis(N) || N <- [user_drv, user_drv_writer, user_drv_reader, user,
                                    standard_error, standard_error_writer]],
    lists:usort([self() | leaders([Io], [])] ++ [P || P <- Terminal, is_pid(P)]);
printing_path(_) ->
    [self()].

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

header(#st{opts = #{header := {Kind, Text}} = Opts} = St) ->
    Limits = lists:join(" or ",
                        [io_lib:format("~w events", [N]) || N <- [maps:get(max_events, Opts)], N =/= infinity]
                        ++ [io_lib:format("~w ms", [T]) || T <- [maps:get(max_time, Opts)], T =/= infinity]
                        ++ [io_lib:format("more than ~w events in ~w ms", [N, Ms])
                            || {N, Ms} <- [maps:get(rate, Opts)]]),
    What = case Kind of
               calls -> "calls to ";
               latency -> "the latency of calls to ";
               slow -> io_lib:format("the calls over ~ts of ",
                                     [tracekit_latency_view:duration(maps:get(over, maps:get(slow, Opts)))]);
               messages -> "messages of ";
               procs -> "process events of "
           end,
    ["tracekit: tracing ", What, Text,
     case St#st.multi of
         true -> on_nodes(St#st.nodes);
         false -> ""
     end,
     case Opts of
         #{file := Path} -> io_lib:format(" into ~ts", [filename:flatten(Path)]);
         #{slow := #{dir := Dir}} -> io_lib:format(" into ~ts", [filename:flatten(Dir)]);
         _ -> ""
     end,
     case {Limits, Opts} of
         {_, #{slow := #{max_captures := MaxC}}} ->
             [" (stops after ", integer_to_list(MaxC), " calls kept",
              [[" or ", L] || L <- Limits], ")"];
         {[], _} -> "";
         _ -> [" (stops after ", Limits, ")"]
     end];
header(#st{}) ->
    [].

%% The nodes, and how far apart their clocks may be from what was
%% measured: the merge by time is that exact.
on_nodes(Nodes) ->
    Offsets = tracekit_nodes:offsets(Nodes),
    Err = lists:max([0 | [E || {_, E} <- maps:values(Offsets)]]),
    [" on ", lists:join(", ", [atom_to_list(N) || N <- lists:sort(maps:keys(Offsets))]),
     io_lib:format(" (clocks known within ~w us)", [Err])].

%%% The loop ------------------------------------------------------------------

loop(#st{caller_mon = CM} = St0) ->
    St = St0#st{nodes = tracekit_nodes:request(St0#st.nodes)},
    %% A stop or a wait names the process to answer (tracekit:stop/1 and
    %% wait/2): a message of that shape from anyone else is not one.
    receive
        {stop, From} when is_pid(From) ->
            finish(stopped, St#st{waiters = [From | St#st.waiters]});
        {wait, From} when is_pid(From) ->
            loop(St#st{waiters = [From | St#st.waiters]});
        {'DOWN', CM, process, _, _} ->
            finish(caller_down, St);
        Msg ->
            from_nodes(Msg, St)
    after wait_ms(St) ->
            merged(St)
    end.

wait_ms(#st{deadline = infinity}) ->
    tracekit_proto:idle_ms();
wait_ms(#st{deadline = D}) ->
    max(0, min(tracekit_proto:idle_ms(), D - erlang:monotonic_time(millisecond))).

%%% Latency ---------------------------------------------------------------------

%% The table, every TABLE_MS (printed only).
latency_table(#st{sink = latency, lat_tick = Tick, opts = #{print := true}} = St) ->
    Now = erlang:monotonic_time(millisecond),
    case Now >= Tick of
        true ->
            View = latency_view(St, Now),
            St1 = print(St, tracekit_latency_view:table(View, St#st.opts)),
            St1#st{lat_tick = max(Tick + ?TABLE_MS, Now + ?TABLE_MS div 2),
                   lat_prev = {Now, maps:map(fun(_, #{returns := #{count := R},
                                                      exceptions := #{count := E}}) -> R + E
                                             end, maps:get(functions, View))}};
        false ->
            St
    end;
latency_table(St) ->
    St.

%% The nodes' histograms, merged, at Now (ms).
latency_view(#st{nodes = N, lat_start = T0, lat_prev = {PrevAt, Prev}}, Now) ->
    Snaps = tracekit_nodes:latency(N),
    {Fns, Counters, Left} = tracekit_latency_view:merge(Snaps),
    #{functions => Fns, nodes => tracekit_latency_view:by_node(Snaps), counters => Counters,
      seconds => (Now - T0) / 1000, previous => Prev, interval => (Now - PrevAt) / 1000,
      left_out => Left}.

from_nodes(Msg, #st{nodes = N} = St) ->
    case tracekit_nodes:handle(Msg, N) of
        {ok, N1} ->
            merged(St#st{nodes = N1});
        {down, Node, Why, N1} ->
            St1 = print(St#st{nodes = N1},
                        io_lib:format("tracekit: node ~ts is gone (~0tP); the other nodes "
                                      "go on", [atom_to_list(Node), Why, 5])),
            case tracekit_nodes:finished(N1) of
                true -> finish(nodes_down, St1);
                false -> merged(St1)
            end;
        ignore ->
            loop(St)
    end.

%% What the merge lets go, through the limits (a latency trace: its table
%% when due); then the end of the trace when a limit is reached.
merged(St) ->
    St1 = latency_table(take(St)),
    case ended(St1) of
        none -> loop(St1);
        Why -> finish(Why, St1)
    end.

%% Why the trace must end now, or none.
ended(#st{open = false, reason = Why}) ->
    Why;
ended(St) ->
    case past_deadline(St) of
        none -> file_limit(St);
        Why -> Why
    end.

past_deadline(#st{deadline = infinity}) ->
    none;
past_deadline(#st{deadline = D, opts = Opts}) ->
    case erlang:monotonic_time(millisecond) >= D of
        true -> {max_time, maps:get(max_time, Opts)};
        false -> none
    end.

%% With files, each node's writer applies the limits to its own file; the
%% trace ends when one of them reached one, or when the nodes wrote
%% max_events together.
file_limit(#st{sink = file, nodes = N, opts = #{max_events := Max}}) ->
    Counters = [C || #{counters := C} <- maps:values(tracekit_nodes:summary(N))],
    Written = lists:sum([W || #{written := W} <- Counters]),
    case [L || #{limit := L} <- Counters, L =/= none] of
        [L | _] -> L;
        [] when Max =/= infinity, Written >= Max -> {max_events, Max};
        [] -> none
    end;
file_limit(_) ->
    none.

take(#st{nodes = N, printer = P} = St) ->
    {Items, N1} = tracekit_nodes:take(N),
    St1 = items(Items, lost(St#st{nodes = N1, batch_at = erlang:monotonic_time(millisecond),
                                  printer = tracekit_printer:add_names(tracekit_nodes:names(N1), P)})),
    case St1#st.slow of
        undefined -> St1;
        Slow -> St1#st{slow = tracekit_slow:lost(done, Slow)}
    end.

%% Events a node's ring refused (dropped when full, or overwritten), or
%% that came too late for the merge: not those on their way.
refused(#{counters := C, late := Late}) ->
    maps:get(dropped, C, 0) + maps:get(overwritten, C, 0) + Late;
refused(#{}) ->
    0.

%% A slow trace: the nodes whose rings refused events since the last
%% batch (their calls in this batch are let go: tracekit_slow:lost/2).
lost(#st{slow = undefined} = St) ->
    St;
lost(#st{slow = Slow, slow_lost = Before, nodes = N} = St) ->
    Lost = maps:map(fun(_, S) -> refused(S) end, tracekit_nodes:summary(N)),
    Grew = [Node || Node := L <- Lost, L > maps:get(Node, Before, 0)],
    St#st{slow = tracekit_slow:lost(Grew, Slow), slow_lost = Lost}.

items([], St) ->
    St;
items([{Node, T, E} | Rest], #st{per_node = PN} = St) ->
    {Shown0, Over0} = maps:get(Node, PN, {0, 0}),
    {Shown, Over, St1} = event(E, T, Node, St),
    items(Rest, St1#st{per_node = (St1#st.per_node)#{Node => {Shown0 + Shown, Over0 + Over}}}).

%%% Events --------------------------------------------------------------------

%% An event through the limits: shown (1, 0), not shown (0, 1), or left
%% out as tracekit's own (0, 0).
event(_E, _T, _Node, #st{open = false} = St) ->
    {0, 1, St};
event(E, T, Node, #st{slow = Slow} = St) when Slow =/= undefined ->
    {Kept, Slow1} = tracekit_slow:event(E, {T, Node}, Slow),
    {0, 0, lists:foldl(fun captured/2, St#st{slow = Slow1}, Kept)};
event(E, T, Node, St) ->
    case hidden(E, St) of
        true ->
            {0, 0, St};
        false ->
            case tracekit_limits:event(T, St#st.limits) of
                {show, L} ->
                    show(E, Node, St#st{limits = L});
                {last, Why, L} ->
                    {S, O, St1} = show(E, Node, St#st{limits = L}),
                    {S, O, St1#st{open = false, reason = first_reason(St1#st.reason, Why)}};
                {stop, Why, L} ->
                    {0, 1, St#st{limits = L, open = false, reason = first_reason(St#st.reason, Why)}}
            end
    end.

%% Return values of functions whose specs asked only for exceptions (the
%% VM reports both with exception_trace); the messages of tracekit's own
%% work in the caller's process: its requests to this process, and the
%% answer that tracing is on.
hidden(E, #st{specs = Specs}) when element(3, E) =:= return_from, Specs =/= [],
                                   tuple_size(element(4, E)) =:= 3 ->
    not tracekit_spec:shows_return(Specs, element(4, E));
hidden(E, _St) when element(3, E) =:= send, tuple_size(E) >= 5, element(5, E) =:= self() ->
    true;
hidden(E, #st{caller = C, start_ref = Ref}) when element(3, E) =:= 'receive',
                                                 element(2, E) =:= C ->
    element(4, E) =:= {Ref, ok};
hidden(_, _) ->
    false.

show(E, Node, #st{opts = #{keep := {last, N}}, kept = K, kept_len = Len} = St) ->
    K1 = queue:in({Node, E}, K),
    case Len >= N of
        true ->
            {{value, {Gone, _}}, K2} = queue:out(K1),
            PN = St#st.per_node,
            {GS, GO} = maps:get(Gone, PN, {0, 0}),
            {1, 0, St#st{kept = K2, per_node = PN#{Gone => {GS - 1, GO + 1}}}};
        false ->
            {1, 0, St#st{kept = K1, kept_len = Len + 1}}
    end;
show(E, _Node, #st{opts = #{print := false}, collected = C} = St) ->
    {1, 0, St#st{collected = [E | C]}};
show(E, Node, #st{opts = Opts, printer = P} = St) ->
    NodeShown = case St#st.multi of true -> Node; false -> undefined end,
    St1 = case tracekit_printer:line(E, NodeShown, Opts, P) of
              {timeout, P1} ->
                  StT = print(St#st{printer = P1},
                              io_lib:format("tracekit: the format fun did not return a "
                                            "line within ~w ms", [tracekit_printer:format_ms()])),
                  StT#st{open = false,
                         reason = first_reason(StT#st.reason,
                                               {format_timeout, tracekit_printer:format_ms()})};
              {Line, P1} ->
                  print(St#st{printer = P1}, Line)
          end,
    {1, 0, interrupted(St1)}.

%% A call the slow trace keeps: written out, and a line; the trace ends
%% at the last one it may keep.
captured(_Capture, #st{open = false} = St) ->
    St;
captured(Capture, #st{captures = Done, opts = #{slow := #{dir := Dir, max_captures := Max}}} = St) ->
    N = length(Done) + 1,
    Info = maps:without([events], Capture),
    {Kept, Line} =
        case tracekit_slow:write(Capture, N, Dir) of
            {ok, Files} ->
                {maps:merge(Info#{events => length(maps:get(events, Capture))}, Files),
                 slow_line(Capture, Files, St)};
            {error, Why} ->
                {Info#{events => length(maps:get(events, Capture)), error => Why},
                 io_lib:format("tracekit: a slow call could not be written into ~ts: ~0tP",
                               [filename:flatten(Dir), Why, 10])}
        end,
    St1 = print(St#st{captures = [Kept | Done]}, Line),
    %% (Writing a call out takes time, bounded by max_bytes; a stop that
    %% comes meanwhile waits for the events recorded before it.)
    case N >= Max of
        true -> St1#st{open = false, reason = first_reason(St1#st.reason, {max_captures, Max})};
        false -> St1
    end.

slow_line(#{pid := Pid, node := Node, mfa := {M, F, A}, duration := D, result := R,
            events := Es}, #{report := Report}, St) ->
    io_lib:format("tracekit: ~ts~ts ~w:~w/~w took ~ts (~w), ~w events: ~ts",
                  [case St#st.multi of true -> [atom_to_list(Node), " "]; false -> "" end,
                   pid_to_list(Pid), M, F, A, tracekit_latency_view:duration(D), R, length(Es),
                   filename:flatten(Report)]).

%% Slow lines (a slow format fun or io device) do not hold the trace past
%% its time limit, nor keep a stop or the caller's exit waiting for the
%% rest of a batch. (When lines are quick, what happened before a stop is
%% shown.)
interrupted(#st{open = false} = St) ->
    St;
interrupted(#st{caller_mon = CM, batch_at = At} = St) ->
    Slow = erlang:monotonic_time(millisecond) - At > ?SLOW_MS,
    case past_deadline(St) of
        none when not Slow ->
            St;
        none ->
            receive
                {stop, From} when is_pid(From) ->
                    St#st{open = false, reason = stopped, waiters = [From | St#st.waiters]};
                {'DOWN', CM, process, _, _} ->
                    St#st{open = false, reason = caller_down}
            after 0 ->
                    St
            end;
        Why ->
            St#st{open = false, reason = Why}
    end.

first_reason(undefined, Why) -> Why;
first_reason(Reason, _) -> Reason.

%% Prints a line, unless the trace collects or its io device stopped
%% answering (then the trace ends).
print(#st{opts = #{print := false}} = St, _Line) ->
    St;
print(#st{io_ok = false} = St, _Line) ->
    St;
print(St, []) ->
    St;
print(#st{opts = Opts, reason = Reason} = St, Line) ->
    case tracekit_printer:put_chars(maps:get(io, Opts, standard_io), [Line, $\n], ?PRINT_MS) of
        ok -> St;
        timeout -> St#st{io_ok = false, open = false,
                         reason = first_reason(Reason, {io_timeout, ?PRINT_MS})}
    end.

%%% The end -------------------------------------------------------------------

-spec finish(term(), #st{}) -> no_return().
finish(Reason0, St0) ->
    %% The events recorded before the end are still shown; a limit that
    %% they reach is the reason.
    St1 = close_nodes(waiters(St0)),
    St = St1#st{reason = first_reason(St1#st.reason, Reason0)},
    Summary0 = summary(St),
    Summary = case St#st.opts of
                  #{slow := _, print := false} -> Summary0;
                  #{slow := _} -> _ = print(St, slow_summary_line(Summary0)), Summary0;
                  #{latency := _, print := false} -> Summary0;
                  #{latency := _} ->
                      View = latency_view(St, erlang:monotonic_time(millisecond)),
                      %% calls/s over the whole trace.
                      Whole = View#{previous := #{}, interval := maps:get(seconds, View)},
                      _ = print(St, [tracekit_latency_view:table(Whole, St#st.opts),
                                     tracekit_latency_view:summary_line(Summary0)]),
                      Summary0;
                  #{print := false, file := _} -> Summary0;
                  #{keep := _} -> Summary0#{events => [E || {_, E} <- queue:to_list(St#st.kept)]};
                  #{print := false} -> Summary0#{events => lists:reverse(St#st.collected)};
                  _ -> _ = print(St, tracekit_format:summary(Summary0)), Summary0
              end,
    To = case St#st.opts of
             #{print := false} -> [St#st.caller | St#st.waiters];
             _ -> St#st.waiters
         end,
    _ = [P ! {tracekit, self(), done, Summary} || P <- lists:usort(To)],
    exit(normal).

slow_summary_line(#{counters := C, captures := Kept, dir := Dir, dropped := Dropped,
                    reason := Reason}) ->
    #{calls := Calls, looked_at := Looked, fast := Fast, unfinished := Open} = C,
    io_lib:format("tracekit: ~w calls of the spec, ~w looked at: ~w kept, ~w fast, "
                  "~w unfinished; ~ts; files in ~ts (~0tP)",
                  [Calls, Looked, length(Kept), Fast, Open,
                   case Dropped of
                       0 -> "no event refused by a full ring";
                       _ -> io_lib:format("~w events refused by a full ring (the calls open "
                                          "meanwhile let go as broken: a larger ring_size "
                                          "keeps them)", [Dropped])
                   end,
                   filename:flatten(Dir), Reason, 5]).

%% Those who asked for the end while lines were being made.
waiters(St) ->
    receive
        {stop, From} when is_pid(From) -> waiters(St#st{waiters = [From | St#st.waiters]});
        {wait, From} when is_pid(From) -> waiters(St#st{waiters = [From | St#st.waiters]})
    after 0 ->
            St
    end.

%% Stops tracing on every node, and takes in their last events.
close_nodes(#st{nodes = N} = St) ->
    drain(St#st{nodes = tracekit_nodes:close(N)},
          erlang:monotonic_time(millisecond) + ?CLOSE_MS).

drain(#st{nodes = N0} = St0, Until) ->
    St = take(St0#st{nodes = tracekit_nodes:request(N0)}),
    case tracekit_nodes:finished(St#st.nodes) of
        true ->
            St;
        false ->
            Left = Until - erlang:monotonic_time(millisecond),
            receive
                {stop, From} when is_pid(From) ->
                    drain(St#st{waiters = [From | St#st.waiters]}, Until);
                Msg ->
                    case tracekit_nodes:handle(Msg, St#st.nodes) of
                        ignore -> drain(St, Until);
                        {ok, N1} -> drain(St#st{nodes = N1}, Until);
                        {down, _, _, N1} -> drain(St#st{nodes = N1}, Until)
                    end
            after max(0, min(tracekit_proto:idle_ms(), Left)) ->
                    case Left > 0 of
                        true -> drain(St, Until);
                        false -> St
                    end
            end
    end.

%% After every node stopped: what was shown (or written), what was not,
%% in all and per node; or what was measured.
summary(#st{sink = latency, nodes = N, reason = Reason} = St) ->
    View = latency_view(St, erlang:monotonic_time(millisecond)),
    ok = tracekit_nodes:done(N),
    S = tracekit_latency_view:summary(View, St#st.multi),
    Nodes = maps:map(fun(_, #{state := State, counters := C}) ->
                             #{shown => maps:get(measured, C, 0),
                               dropped => maps:get(dropped, C, 0) + maps:get(unplaced, C, 0),
                               state => State}
                     end, tracekit_nodes:summary(N)),
    Total = S#{reason => Reason,
               shown => lists:sum([X || #{shown := X} <- maps:values(Nodes)]),
               dropped => lists:sum([X || #{dropped := X} <- maps:values(Nodes)])},
    case St#st.multi of
        true -> Total#{nodes => Nodes, clocks => tracekit_nodes:offsets(N)};
        false -> Total
    end;
summary(#st{slow = Slow, captures = Done, nodes = N, opts = #{slow := #{dir := Dir}}} = St)
  when Slow =/= undefined ->
    %% Events the rings refused: a call kept while they were may miss
    %% some. (Those that came after the end are not counted here.)
    Refused = lists:sum([refused(NS) || NS <- maps:values(tracekit_nodes:summary(N))]),
    AfterEnd = lists:sum([Over || {_, Over} <- maps:values(St#st.per_node)]),
    S = summary(St#st{slow = undefined}),
    Counters = tracekit_slow:counters(tracekit_slow:finish(Slow)),
    S#{captures => lists:reverse(Done), dir => Dir, dropped := Refused,
       counters => Counters#{after_end => AfterEnd}};
summary(#st{sink = file, nodes = N, opts = #{file := Path}, reason = Reason} = St) ->
    {Files, Missing} = case St#st.multi of
                           true -> tracekit_nodes:fetch(N, Path);
                           false -> {[], []}
                       end,
    ok = tracekit_nodes:done(N),
    Nodes = maps:map(fun(Node, #{state := S, counters := C}) ->
                             Written = maps:get(written, C, 0),
                             Dropped0 = maps:get(dropped, C, 0) + maps:get(over, C, 0)
                                 + maps:get(buffered, C, 0),
                             %% A file not fetched: what it holds is not
                             %% in the files returned, so not shown.
                             case lists:keyfind(Node, 1, Missing) of
                                 {Node, Why} ->
                                     #{shown => 0, dropped => Dropped0 + Written,
                                       state => case S of
                                                    closed -> {not_fetched, Why};
                                                    _ -> S
                                                end};
                                 false ->
                                     #{shown => Written, dropped => Dropped0, state => S}
                             end
                     end, tracekit_nodes:summary(N)),
    Shown = lists:sum([S || #{shown := S} <- maps:values(Nodes)]),
    Dropped = lists:sum([D || #{dropped := D} <- maps:values(Nodes)]),
    Limit = case [L || #{counters := #{limit := L}} <- maps:values(tracekit_nodes:summary(N)),
                       L =/= none] of
                [L | _] when not St#st.multi -> L;
                _ -> Reason
            end,
    case St#st.multi of
        true ->
            #{reason => Reason, shown => Shown, dropped => Dropped, file => Path,
              files => lists:sort(Files), nodes => Nodes,
              clocks => tracekit_nodes:offsets(N)};
        false ->
            #{reason => Limit, shown => Shown, dropped => Dropped, file => Path}
    end;
summary(#st{nodes = N, per_node = PN, reason = Reason} = St) ->
    ok = tracekit_nodes:done(N),
    Nodes = maps:map(fun(Node, #{state := S, lost := Lost}) ->
                             {Shown, Over} = maps:get(Node, PN, {0, 0}),
                             #{shown => Shown, dropped => Lost + Over, state => S}
                     end, tracekit_nodes:summary(N)),
    Total = #{reason => Reason,
              shown => lists:sum([S || #{shown := S} <- maps:values(Nodes)]),
              dropped => lists:sum([D || #{dropped := D} <- maps:values(Nodes)])},
    case St#st.multi of
        true -> Total#{nodes => Nodes, clocks => tracekit_nodes:offsets(N)};
        false -> Total
    end.
