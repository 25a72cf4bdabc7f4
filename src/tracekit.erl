%% @doc Tracing at the shell, safe by default.
%%
%% ```
%% 1> tracekit:calls("lists:seq/2 -> return").
%% tracekit: tracing calls to lists:seq/2 -> return (stops after 100 events or 15000 ms)
%% {ok,<0.95.0>}
%% 12:03:04.123456 <0.90.0> lists:seq(1, 3)
%% 12:03:04.123470 <0.90.0> lists:seq/2 -> [1,2,3]
%% 2> tracekit:messages(my_server, #{max_events => 10}).
%% 3> tracekit:stop().
%% '''
%%
%% Every trace runs in a trace session of its own, so it does not disturb
%% dbg, tprof or other tracekit users. The traced processes only record
%% into a {@link tracekit_ring}; a separate process drains it and prints one
%% line per event in the shell that started the trace. Limits are on by
%% default: at most 100 events and at most 15 seconds, and optionally a
%% rate; whichever comes first ends the trace, and the summary line says
%% how many events were dropped (beyond the limits, or because the ring
%% was full). The trace also ends, and cleans up, on {@link stop/0} and
%% when the process that started it exits.
%%
%% Options (all optional), for every function that starts a trace:
%% <dl>
%% <dt>`max_events'</dt><dd>how many events to show, or `infinity'
%%   (default 100).</dd>
%% <dt>`max_time'</dt><dd>milliseconds before the trace ends, or
%%   `infinity' (default 15000).</dd>
%% <dt>`rate'</dt><dd>`{N, Milliseconds}': end the trace when more than N
%%   events happen within that time (default `none').</dd>
%% <dt>`print'</dt><dd>`false' collects the events instead of printing
%%   them: {@link wait/2} or {@link stop/1} return them, and the summary is
%%   also sent to the caller as `{tracekit, Trace, done, Summary}'.</dd>
%% <dt>`format'</dt><dd>a fun from an event (a term as OTP's process tracer
%%   would get it) to the text of its line.</dd>
%% <dt>`io'</dt><dd>where to print (default: the caller's group
%%   leader): a pid, a registered name or `standard_io'. An io device that
%%   does not take a line within 5 seconds ends the trace.</dd>
%% <dt>`depth', `line_length'</dt><dd>how far terms are printed (default
%%   20) and the longest line (default 240 characters).</dd>
%% <dt>`processes'</dt><dd>for {@link calls/2}: whose calls to trace,
%%   `all' (default), `new', `existing', a pid, a registered name or a list
%%   of these.</dd>
%% <dt>`scope'</dt><dd>for {@link calls/2}: `local' (default, every call)
%%   or `global' (only calls from outside the module).</dd>
%% <dt>`ring_size', `payload'</dt><dd>passed to {@link tracekit_ring:new/1}
%%   (defaults 262144 bytes per scheduler and `full').</dd>
%% <dt>`file'</dt><dd>a path: the events are written to this trace file
%%   (a {@link tracekit_file}, with `ring_size' bytes of buffer per
%%   thread) instead of being printed, to be read later with {@link
%%   tracekit_file:read/1} or `tracekit-cat'. The limits apply the same
%%   (the file's writer ends the file at the event where a printed trace
%%   would end); the summary line says where the file is and how many
%%   events it holds. With `print => false' the summary is only sent.
%%   The file holds every event the VM reported: also the return values
%%   of functions whose spec asked for exceptions only, which a printed
%%   trace leaves out.</dd>
%% <dt>`nodes'</dt><dd>`all' (this node and every connected one) or a
%%   list of nodes: the trace runs on each (an agent there owns its
%%   session and ring, and cleans up by itself when this trace or the
%%   connection to it is gone); the events are merged by time, each line
%%   begins with its node, the limits count across the nodes, and the
%%   summary has `nodes' (per node: shown, dropped, and whether it went
%%   down) and `clocks' (each node's clock offset and its error bound in
%%   microseconds). Every node is checked first: `{error, {bad_node, Node,
%%   Why}}' and nothing traced anywhere. With `file', a directory: each
%%   node writes its own file, fetched there at the end (the summary's
%%   `files').</dd>
%% <dt>`stack_depth'</dt><dd>for {@link calls/2}: how many frames a
%%   `-> stack' spec shows (default 8, at most 64): `m:f(1) <- m:g/2 <-
%%   m:h/0', ending in `<- ...' when the stack went on.</dd>
%% <dt>`records'</dt><dd>`true' (default): tuples that are records of
%%   the modules the trace touches (those of the spec, the functions of
%%   the events, the modules processes were started in) print as
%%   `#state{count = 3,name = x}'. The definitions come from the debug
%%   info of the modules' object files, read once per module per trace,
%%   on this node (also in a trace of several nodes); a module without
%%   debug info prints its tuples as tuples. `[Module]' reads those
%%   modules too; `false' prints tuples only.</dd>
%% <dt>`short_refs'</dt><dd>`true' (default): references print as a
%%   short tag that stays the same for the whole trace, `#Ref<..83994>'
%%   (more of the reference when another one has the same tag). Collected
%%   events (`print => false') and trace files keep them whole.</dd>
%% <dt>`colour'</dt><dd>`auto' (default): colours for pids and names,
%%   calls, returns, exceptions and message directions when the io device
%%   writes to a terminal (not with `TERM=dumb' or `NO_COLOR' set);
%%   `true' always, `false' never.</dd>
%% <dt>`syntax'</dt><dd>`auto' (default): Elixir syntax when the shell
%%   is iex (`IEx.started?/0'), else Erlang; `erlang'; `elixir' (Elixir
%%   loaded in this node): terms by Elixir's inspect, calls as
%%   `MyApp.Server.handle_call(%{op: :get}, ...)', pids as `#PID<0.105.0>'
%%   (see {@link tracekit_format}). Specs may be in either syntax
%%   whatever this says ({@link tracekit_spec}).</dd>
%% </dl>
%% The processes that printing a line goes through are never traced by
%% `all' or `existing' (each line would make more events): the printer,
%% the io device and the group leaders it hands the output on to, the
%% terminal's processes (user_drv and its writer and reader, user,
%% standard_error) and the VM's dirty process signal handlers.
-module(tracekit).

-export([calls/1, calls/2, messages/1, messages/2, procs/1, procs/2,
         latency/1, latency/2, slow/1, slow/2, stop/0, stop/1, wait/1, wait/2]).
-export([latency_trace/3]).

-export_type([trace/0, opts/0, summary/0, processes/0]).

-type trace() :: pid().
-type processes() :: all | new | existing | pid() | atom() | [pid() | atom()].
-type opts() :: #{max_events => pos_integer() | infinity,
                  max_time => pos_integer() | infinity,
                  rate => none | {pos_integer(), pos_integer()},
                  print => boolean(),
                  format => fun((tuple()) -> unicode:chardata()),
                  io => io:device(),
                  depth => pos_integer(),
                  line_length => pos_integer(),
                  processes => processes(),
                  scope => local | global,
                  ring_size => pos_integer(),
                  file => file:name_all(),
                  nodes => all | [node()],
                  payload => full | none | {max_bytes, pos_integer()},
                  stack_depth => 1..64,
                  records => boolean() | [module()],
                  short_refs => boolean(),
                  colour => boolean() | auto,
                  syntax => erlang | elixir | auto}.
%% `reason': why the trace ended; `shown': events printed or collected;
%% `dropped': events that happened while tracing but were not shown (beyond
%% a limit, or refused by a full ring); `events': the collected events when
%% `print' is false.
-type summary() :: tracekit_trace:summary().
-type error() :: {error, {bad_spec | bad_process | bad_option | bad_node | tracer_failed,
                          term(), string() | binary()}}.

-define(DEFAULTS, #{max_events => 100, max_time => 15000, rate => none,
                    print => true, depth => 20, line_length => 240,
                    processes => all, scope => local,
                    ring_size => 1 bsl 18, payload => full, stack_depth => 8,
                    records => true, short_refs => true, colour => auto,
                    syntax => auto}).

%% @equiv calls(Spec, #{})
-spec calls(tracekit_spec:spec()) -> {ok, trace()} | error().
calls(Spec) ->
    calls(Spec, #{}).

%% @doc Traces calls of the functions `Spec' names (see {@link
%% tracekit_spec} for the forms: `"lists:seq/2"', `"mymod:_"',
%% `"mymod:handle_call({get, _}, _, _) -> return"',
%% `"mymod:f/1 -> return, stack"', `{M, F, A}', ...).
%% A bad spec is reported before anything is traced.
-spec calls(tracekit_spec:spec(), opts()) -> {ok, trace()} | error().
calls(Spec, Opts) ->
    maybe
        {ok, O} ?= options(Opts),
        {ok, Resolved} ?= tracekit_spec:resolve(Spec, maps:with([stack_depth], O)),
        {ok, Procs} ?= processes(maps:get(processes, O), O),
        Text = lists:join(", ", [tracekit_spec:format(C) || {C, _} <- Resolved]),
        Scope = maps:get(scope, O),
        Plan = #{procs => [{Procs, [call, timestamp]}],
                 calls => [{MFA, MS, Scope} || {#{match_spec := MS}, MFAs} <- Resolved,
                                               MFA <- MFAs],
                 seq_trace => false},
        tracekit_trace:start(Plan, O#{specs => [C || {C, _} <- Resolved],
                                      header => {calls, [Text, in_procs(Procs, O)]}})
    end.

%% @equiv latency(Spec, #{})
-spec latency(tracekit_spec:spec()) -> {ok, trace()} | error().
latency(Spec) ->
    latency(Spec, #{}).

%% @doc Measures how long the calls of the functions `Spec' names take
%% (the same specs as {@link calls/2}; the actions after `->' do not
%% matter: every call is measured to its return or exception), per
%% function, in C ({@link tracekit_latency}): no message per call, memory
%% bounded whatever the call rate. At the shell a table is printed every
%% second, one line per function (count, calls/s, p50, p90, p99, max,
%% total time), sorted by total time; at the end the table of the whole
%% trace and a summary line. The trace ends after `max_time' (default
%% 15000 ms) or on {@link stop/0,1}.
%%
%% With `print => false', {@link wait/2} and {@link stop/1} return the
%% summary: `latency => #{MFA => #{count, p50, p90, p99, max, min, mean,
%% total, calls_per_second, exceptions, exception_total, exception_max,
%% unfinished, nested}}' (microseconds; `count' the calls that returned,
%% `exceptions' those that raised, counted apart), `counters' (of {@link
%% tracekit_latency:stats/1}, added up over the nodes), `seconds', and
%% with `nodes', `latency_nodes' (per node) and `nodes'.
%%
%% Percentiles are within 0.79 % of the exact ones (nearest rank); with
%% `nodes' each node keeps its own histograms and this node merges them
%% exactly. Options: `max_time', `print', `io', `processes', `scope' and
%% `nodes' as for {@link calls/2}; `recursion' (`outermost', the default:
%% a call of a function inside a call of the same function in the same
%% process is part of the outer one and not measured; `each': every level
%% is measured); `per_node' (`true': the table has a line per node under
%% each function); `lines' (the most functions a table shows, default
%% 20); `ring_size' (bytes of each scheduler's ring, default 1 MiB);
%% `max_functions', `max_processes', `max_frames' (the bounds of {@link
%% tracekit_latency:new/1}). A call still open when its process exits or
%% the trace ends is `unfinished', never measured.
-spec latency(tracekit_spec:spec(), opts() | #{atom() => term()}) -> {ok, trace()} | error().
latency(Spec, Opts) ->
    latency_trace(Spec, Opts, #{}).

%% @private
%% @doc A latency trace as {@link latency/2} starts it, with `More'
%% trace options on top (the CT hook's: `watch', `bad_node', `follow').
-spec latency_trace(tracekit_spec:spec(), term(), map()) -> {ok, trace()} | error().
latency_trace(Spec, Opts, More) ->
    maybe
        {ok, O0} ?= latency_options(Opts),
        O = maps:merge(O0, More),
        {ok, Resolved} ?= tracekit_spec:resolve(Spec),
        {ok, Procs} ?= processes(maps:get(processes, O), O),
        Text = lists:join(", ", [tracekit_spec:format(C) || {C, _} <- Resolved]),
        Scope = maps:get(scope, O),
        %% Every clause's action: the return or exception of the call.
        Plan = #{procs => [{Procs, [call, procs]}],
                 calls => [{MFA, [{Head, Guard, [{exception_trace}]} || {Head, Guard, _} <- MS],
                            Scope}
                           || {#{match_spec := MS}, MFAs} <- Resolved, MFA <- MFAs],
                 seq_trace => false},
        In = in_procs(Procs, maps:merge(#{syntax => erlang}, O)),
        tracekit_trace:start(Plan, O#{header => {latency, [Text, In]}})
    end.

%% The options of a latency trace: those of the other traces that mean
%% something here, and its own.
latency_options(Opts) when is_map(Opts) ->
    Own = [recursion, per_node, lines, max_functions, max_processes, max_frames],
    Shared = [max_time, print, io, processes, scope, nodes, ring_size, colour],
    case [{K, V} || K := V <- Opts, not lists:member(K, Own ++ Shared)] of
        [{K, V} | _] ->
            {error, {bad_option, {K, V},
                     case lists:member(K, maps:keys(?DEFAULTS) ++ [format, file]) of
                         true -> lists:flatten(io_lib:format(
                                                 "~tw does not apply to latency, which "
                                                 "measures every call until max_time or "
                                                 "tracekit:stop/0,1", [K]));
                         false -> lists:flatten(io_lib:format(
                                                  "unknown option ~0tP; known for latency: ~ts",
                                                  [K, 5, lists:join(", ", [atom_to_list(X)
                                                                        || X <- Own ++ Shared])]))
                     end}};
        [] ->
            LatOpts = maps:with([recursion, max_functions, max_processes, max_frames], Opts),
            Size = maps:get(ring_size, Opts, 1 bsl 20),
            case [{K, V, Why} || K := V <- LatOpts#{size => Size},
                                 {error, Why} <- [tracekit_latency:check_option(K, V)]]
                ++ [{K, V, Why} || K := V <- maps:with([per_node, lines], Opts),
                                   Why <- [latency_problem(K, V)], Why =/= none] of
                [{K, V, Why} | _] ->
                    Key = case K of size -> ring_size; _ -> K end,
                    {error, {bad_option, {Key, V}, lists:flatten([atom_to_list(Key), ": ", Why])}};
                [] ->
                    case options(maps:with(Shared -- [ring_size], Opts)) of
                        {ok, O} ->
                            {ok, O#{max_events => infinity, rate => none,
                                    latency => LatOpts#{size => Size},
                                    per_node => maps:get(per_node, Opts, false),
                                    lines => maps:get(lines, Opts, 20)}};
                        {error, _} = E ->
                            E
                    end
            end
    end;
latency_options(Opts) ->
    options(Opts).

latency_problem(per_node, B) when is_boolean(B) -> none;
latency_problem(per_node, _) -> "true or false";
latency_problem(lines, N) when is_integer(N), N > 0 -> none;
latency_problem(lines, _) -> "a positive integer";
latency_problem(_, _) -> none.

%% @equiv slow(Spec, #{})
-spec slow(tracekit_spec:spec()) -> {ok, trace()} | error().
slow(Spec) ->
    slow(Spec, #{}).

%% @doc Keeps the whole story of each slow call of the functions `Spec'
%% names (the specs of {@link calls/2}; their guards choose the calls):
%% for every call that takes at least `over' or raises, what its process
%% did during it: the calls it made (every function, with where each
%% returned to), the messages it sent and received, when it was scheduled
%% out and in, its garbage collections. Each kept call becomes a trace
%% file (`slow-N.tkt', for {@link tracekit_file:read/1} and
%% `tracekit-cat') and a report page (`slow-N.html': the calls as nested
%% bars on a time axis, the messages as a sequence diagram) in `dir', and
%% a line at the shell. Calls that end sooner are let go.
%%
%% ```
%% 1> tracekit:slow("my_server:handle_call/3", #{over => {50, ms}, processes => [my_server]}).
%% tracekit: tracing the calls over 50.0ms of my_server:handle_call/3 in <0.131.0> (my_server)
%% into /tmp/tracekit-slow-4242-k3J9xQwe2aTz (stops after 10 calls kept or 15000 ms)
%% {ok,<0.140.0>}
%% tracekit: <0.131.0> my_server:handle_call/3 took 212ms (return), 1822 events:
%% /tmp/tracekit-slow-4242-k3J9xQwe2aTz/slow-1.html
%% '''
%% How: every traced process is made `silent' (no call events) with a
%% pattern on every function (of the modules loaded when the trace
%% starts); the spec's patterns turn the process's events on at its first
%% call of the spec; the events of each call are held (on the node where
%% the trace was started) until the call returns and kept or let go then.
%% So while the trace runs, every process of `processes' pays the VM's
%% check at each of its function calls (about 0.2 us; README.md, "The
%% whole story of a slow call", has the measurements: name the processes
%% on a busy node), and a process that has called the spec reports all
%% its events until the trace ends (those between its calls of the spec
%% are let go: `outside').
%%
%% Options: `over' (`{Amount, us | ms | s}', default `{100, ms}'),
%% `max_captures' (how many calls to keep, default 10: the trace ends at
%% the last), `max_bytes' (of the events one call keeps, each counted by
%% the larger of its external size and its size on the heap, default 4
%% MiB; what comes later in the call is left out and counted as `cut',
%% its return is kept; the calls held at once hold at most 8 times
%% `max_bytes' together), `sample' (look at every Nth
%% call of the spec only, default 1), `dir' (an existing directory: the
%% files go into a new directory of the trace's own in it, `tracekit-slow-'
%% and random characters, mode 0700, the summary's `dir'; default the
%% system's temporary directory); `max_time', `print', `io', `processes',
%% `scope', `nodes',
%% `ring_size', `colour' as for {@link calls/2}.
%%
%% With `print => false', {@link wait/2} and {@link stop/1} return the
%% summary: `captures' (per kept call: `pid', `node', `mfa', `start' (us
%% since the epoch), `duration' (us), `result' (`return' or
%% `exception'), `events', `cut', `file', `report'), `counters' (`calls'
%% of the spec, `looked_at', `fast', `kept', `unfinished' (of which
%% `exited': their process exited during the call), `broken' (let go
%% because their node's ring refused events meanwhile), `outside', `cut',
%% `after_end': events that came after the last call the trace
%% could keep), `dir', and `dropped' (events the rings refused: a call
%% kept meanwhile misses them).
-spec slow(tracekit_spec:spec(), opts() | #{atom() => term()}) -> {ok, trace()} | error().
slow(Spec, Opts) ->
    maybe
        {ok, O} ?= slow_options(Opts),
        {ok, Resolved} ?= tracekit_spec:resolve(Spec),
        {ok, Procs} ?= processes(maps:get(processes, O), O),
        {ok, Dir} ?= slow_dir(O),
        Text = lists:join(", ", [tracekit_spec:format(C) || {C, _} <- Resolved]),
        Calls = [{MFA, MS} || {#{match_spec := MS}, MFAs} <- Resolved, MFA <- MFAs],
        Plan = tracekit_slow:plan(Procs, Calls, maps:get(scope, O)),
        In = in_procs(Procs, maps:merge(#{syntax => erlang}, O)),
        #{slow := SlowOpts} = O,
        case tracekit_trace:start(Plan, O#{slow := SlowOpts#{dir => Dir,
                                                             patterns => [MFA || {MFA, _} <- Calls]},
                                           header => {slow, [Text, In]}}) of
            {ok, _} = Ok -> Ok;
            {error, _} = E -> tracekit_private:delete_dir(Dir), E
        end
    end.

-define(SLOW_DEFAULTS, #{over => {100, ms}, max_captures => 10, max_bytes => 4 bsl 20,
                         sample => 1}).

slow_options(Opts) when is_map(Opts) ->
    Own = [over, max_captures, max_bytes, sample, dir],
    Shared = [max_time, print, io, processes, scope, nodes, ring_size, colour],
    case [{K, V} || K := V <- Opts, not lists:member(K, Own ++ Shared)] of
        [{K, V} | _] ->
            {error, {bad_option, {K, V},
                     lists:flatten(io_lib:format("unknown option ~0tP; known for slow: ~ts",
                                                 [K, 5, lists:join(", ", [atom_to_list(X)
                                                                       || X <- Own ++ Shared])]))}};
        [] ->
            case [{K, V, Why} || K := V <- maps:with(Own, Opts),
                                 Why <- [slow_problem(K, V)], Why =/= none] of
                [{K, V, Why} | _] ->
                    {error, {bad_option, {K, V}, lists:flatten([atom_to_list(K), ": ", Why])}};
                [] ->
                    case options(maps:with(Shared, Opts)) of
                        {ok, O} ->
                            S = maps:merge(?SLOW_DEFAULTS, maps:with(Own, Opts)),
                            {ok, O#{max_events => infinity, rate => none,
                                    ring_size => maps:get(ring_size, Opts, 1 bsl 20),
                                    slow => S#{over := microseconds(maps:get(over, S))}}};
                        {error, _} = E ->
                            E
                    end
            end
    end;
slow_options(Opts) ->
    options(Opts).

slow_problem(over, {N, U}) when is_integer(N), N >= 0, (U =:= us orelse U =:= ms orelse U =:= s) ->
    none;
slow_problem(over, _) ->
    "{Amount, us | ms | s}, Amount a non-negative integer, for example {50, ms}";
slow_problem(K, N) when (K =:= max_captures orelse K =:= sample), is_integer(N), N > 0 ->
    none;
slow_problem(K, _) when K =:= max_captures; K =:= sample ->
    "a positive integer";
slow_problem(max_bytes, N) when is_integer(N), N >= 1024, N =< 1 bsl 30 ->
    none;
slow_problem(max_bytes, _) ->
    "an integer of bytes from 1024 to 1 GiB (1073741824)";
slow_problem(dir, D) ->
    try filelib:is_dir(D) of
        true -> none;
        false -> "an existing directory"
    catch
        _:_ -> "an existing directory"
    end.

microseconds({N, us}) -> N;
microseconds({N, ms}) -> N * 1000;
microseconds({N, s}) -> N * 1000000.

%% Where the kept calls are written: a new directory of this trace's own
%% (this user's alone), in the directory given or the temporary one: two
%% traces, or two runs into the same dir, never write over each other.
slow_dir(O) ->
    {Parent, Key} = case O of
                        #{slow := #{dir := Dir}} -> {Dir, Dir};
                        #{} -> {tracekit_private:temp_dir(), default}
                    end,
    case tracekit_private:dir(Parent, "tracekit-slow-") of
        {ok, Own} -> {ok, Own};
        {error, Why} ->
            {error, {bad_option, {dir, Key},
                     lists:flatten(io_lib:format("dir: cannot make a directory in ~ts (~w)~ts",
                                                 [Parent, Why,
                                                  case Key of
                                                      default -> "; give one with dir";
                                                      _ -> ""
                                                  end]))}}
    end.

%% @equiv messages(Processes, #{})
-spec messages(processes()) -> {ok, trace()} | error().
messages(Processes) ->
    messages(Processes, #{}).

%% @doc Traces the messages that `Processes' (pids or registered names,
%% or `all', `new', `existing') send and receive.
-spec messages(processes(), opts()) -> {ok, trace()} | error().
messages(Processes, Opts) ->
    procs_trace(messages, Processes, Opts).

%% @equiv procs(Processes, #{})
-spec procs(processes()) -> {ok, trace()} | error().
procs(Processes) ->
    procs(Processes, #{}).

%% @doc Traces process events of `Processes': spawn, exit, link, unlink,
%% register and unregister.
-spec procs(processes(), opts()) -> {ok, trace()} | error().
procs(Processes, Opts) ->
    procs_trace(procs, Processes, Opts).

procs_trace(Kind, Processes, Opts) ->
    maybe
        {ok, O} ?= options(Opts),
        {ok, Procs} ?= processes(Processes, O),
        Flags = case Kind of
                    messages -> [send, 'receive', timestamp];
                    procs -> [procs, timestamp]
                end,
        tracekit_trace:start(#{procs => [{Procs, Flags}], calls => [], seq_trace => false},
                             O#{header => {Kind, procs_text(Procs, O)}})
    end.

%% @doc Stops every trace the calling process started, and returns when
%% they are cleaned up.
-spec stop() -> ok.
stop() ->
    %% Only BIFs and this module's functions run here: the calling process
    %% may be traced, and tracekit's own work is not shown.
    {monitored_by, Ms} = erlang:process_info(self(), monitored_by),
    stop_mine(Ms, self()).

stop_mine([P | Ps], Self) when is_pid(P), node(P) =:= node() ->
    _ = case erlang:process_info(P, {dictionary, '$tracekit'}) of
            {{dictionary, '$tracekit'}, Self} -> stop(P);
            _ -> ok
        end,
    stop_mine(Ps, Self);
stop_mine([_ | Ps], Self) ->
    stop_mine(Ps, Self);
stop_mine([], _Self) ->
    ok.

%% @doc Stops one trace and returns its summary (with the collected events
%% when `print' is false). `{error, not_running}' when it has ended and
%% its summary was already taken; `{error, not_a_trace}' at once, sending
%% nothing, for anything else than a trace started by tracekit on this
%% node.
-spec stop(trace()) -> {ok, summary()} | {error, not_running | not_a_trace}.
stop(Trace) ->
    request(Trace, stop, infinity).

%% @equiv wait(Trace, infinity)
-spec wait(trace()) -> {ok, summary()} | {error, not_running | not_a_trace}.
wait(Trace) ->
    wait(Trace, infinity).

%% @doc Waits until a trace ends (at a limit) and returns its summary.
%% For a trace that prints, only an end that happens while waiting is
%% seen (else `{error, not_running}'); a trace that collects (`print =>
%% false') sends its summary to the process that started it, so that
%% process can also wait after the end. `{error, not_a_trace}' as for
%% {@link stop/1}; a `Timeout' that is not a timeout raises `badarg'.
-spec wait(trace(), timeout()) ->
          {ok, summary()} | {error, not_running | not_a_trace | timeout}.
wait(Trace, Timeout) when Timeout =:= infinity;
                          is_integer(Timeout), Timeout >= 0, Timeout =< 16#FFFFFFFF ->
    request(Trace, wait, Timeout);
wait(Trace, Timeout) ->
    erlang:error(badarg, [Trace, Timeout]).

%% Asks a trace to stop or to tell when it ends, and waits for its
%% summary. Only a process that is a tracekit trace is sent anything.
request(Trace, What, Timeout) ->
    receive
        {tracekit, Trace, done, Summary} -> {ok, Summary}
    after 0 ->
            case is_trace(Trace) of
                true ->
                    Mon = monitor(process, Trace),
                    Trace ! {What, self()},
                    await(Trace, Mon, Timeout);
                false when is_pid(Trace), node(Trace) =:= node() ->
                    case is_process_alive(Trace) of
                        true -> {error, not_a_trace};
                        false -> {error, not_running}
                    end;
                false ->
                    {error, not_a_trace}
            end
    end.

%% A trace is a live process of this node that tracekit_trace marked.
is_trace(P) when is_pid(P), node(P) =:= node() ->
    case erlang:process_info(P, {dictionary, '$tracekit'}) of
        {{dictionary, '$tracekit'}, Caller} -> is_pid(Caller);
        _ -> false
    end;
is_trace(_) ->
    false.

await(Trace, Mon, Timeout) ->
    receive
        {tracekit, Trace, done, Summary} ->
            demonitor(Mon, [flush]),
            {ok, Summary};
        {'DOWN', Mon, process, Trace, _} ->
            receive
                {tracekit, Trace, done, Summary} -> {ok, Summary}
            after 0 ->
                    {error, not_running}
            end
    after Timeout ->
            demonitor(Mon, [flush]),
            {error, timeout}
    end.

%%% Options and processes -----------------------------------------------------

options(Opts) when is_map(Opts) ->
    case [{K, V, Why} || K := V <- Opts, Why <- [problem(K, V)], Why =/= none] of
        [] -> {ok, syntax(maps:merge(?DEFAULTS, Opts))};
        [{K, V, Why} | _] -> {error, {bad_option, {K, V}, Why}}
    end;
options(Opts) ->
    {error, {bad_option, Opts, "options are a map, for example #{max_events => 10}"}}.

%% What is wrong with an option, or none. The ring's options are checked
%% by tracekit_ring, which knows its limits.
problem(ring_size, N) -> ring_problem(size, N);
problem(payload, P) -> ring_problem(payload, P);
problem(io, Io) -> io_problem(Io);
problem(K, V) ->
    case valid(K, V) of
        true -> none;
        false -> option_help(K)
    end.

ring_problem(Key, V) ->
    case tracekit_ring:check_option(Key, V) of
        ok -> none;
        {error, Why} -> atom_to_list(Key) ++ ": " ++ Why
    end.

valid(max_events, N) -> pos_or_infinity(N);
valid(max_time, N) -> pos_or_infinity(N);
valid(rate, none) -> true;
valid(rate, {N, Ms}) -> is_integer(N) andalso N > 0 andalso is_integer(Ms) andalso Ms > 0;
valid(print, B) -> is_boolean(B);
valid(format, F) -> is_function(F, 1);
valid(depth, N) -> is_integer(N) andalso N > 0;
valid(line_length, N) -> is_integer(N) andalso N >= 20;
valid(processes, _) -> true;
valid(scope, S) -> S =:= local orelse S =:= global;
valid(file, P) -> is_path(P);
valid(stack_depth, N) -> is_integer(N) andalso N >= 1 andalso N =< 64;
valid(records, B) when is_boolean(B) -> true;
valid(records, L) -> is_list(L) andalso L =/= [] andalso lists:all(fun is_atom/1, proper(L));
valid(short_refs, B) -> is_boolean(B);
valid(colour, C) -> is_boolean(C) orelse C =:= auto;
valid(syntax, S) -> S =:= auto orelse S =:= erlang orelse (S =:= elixir andalso tracekit_ex:loaded());
valid(nodes, all) -> true;
valid(nodes, L) -> is_list(L) andalso L =/= [] andalso lists:all(fun is_atom/1, proper(L));
valid(_, _) -> false.

%% The lines must go somewhere: a live process, a registered name, or the
%% caller's group leader (standard_io).
io_problem(standard_io) ->
    none;
io_problem(Io) when Io =:= self() ->
    "io: the calling process is not an io device";
io_problem(Io) when is_pid(Io), node(Io) =/= node() ->
    none;
io_problem(Io) when is_pid(Io) ->
    case is_process_alive(Io) of
        true -> none;
        false -> "io: the process is not alive"
    end;
io_problem(Io) when is_atom(Io) ->
    case whereis(Io) of
        undefined -> lists:flatten(io_lib:format("io: no process is registered as ~tw", [Io]));
        _ -> none
    end;
io_problem(_) ->
    option_help(io).

is_path(P) when is_binary(P) -> P =/= <<>>;
is_path(P) when is_list(P); is_atom(P) ->
    try unicode:characters_to_binary(filename:flatten(P)) of
        Bin when is_binary(Bin) -> Bin =/= <<>>;
        _ -> false
    catch
        error:_ -> false
    end;
is_path(_) ->
    false.

pos_or_infinity(infinity) -> true;
pos_or_infinity(N) -> is_integer(N) andalso N > 0.

option_help(max_events) -> "max_events is a positive integer or infinity";
option_help(max_time) -> "max_time is milliseconds (a positive integer) or infinity";
option_help(rate) -> "rate is none or {N, Milliseconds}, for example {10, 1000}";
option_help(print) -> "print is true or false";
option_help(format) -> "format is a fun of one argument (the event)";
option_help(io) -> "io is an io device: a pid, a registered name or standard_io";
option_help(depth) -> "depth is a positive integer";
option_help(line_length) -> "line_length is an integer of at least 20";
option_help(scope) -> "scope is local or global";
option_help(nodes) -> "nodes is all or a list of node names, for example [node() | nodes()]";
option_help(file) -> "file is the path of the trace file to write, for example \"/tmp/calls.tkt\"";
option_help(stack_depth) -> "stack_depth is an integer from 1 to 64";
option_help(records) -> "records is true, false or a list of modules whose records to read";
option_help(short_refs) -> "short_refs is true or false";
option_help(colour) -> "colour is auto, true or false";
option_help(syntax) -> "syntax is auto (elixir in iex, else erlang), erlang, or elixir "
                           "(which needs Elixir loaded in this node)";
option_help(K) ->
    lists:flatten(io_lib:format(
                    "unknown option ~tw; known: max_events, max_time, rate, "
                    "print, format, io, depth, line_length, processes, scope, "
                    "ring_size, payload, file, nodes, stack_depth, records, "
                    "short_refs, colour, syntax", [K])).

%% With `nodes', pids of any node and names are taken as they are: each
%% node looks up its own (tracekit_nodes).
processes(P, #{nodes := _}) when P =:= all; P =:= new; P =:= existing ->
    {ok, P};
processes(P, #{nodes := _}) when is_pid(P); is_atom(P) ->
    {ok, [P]};
processes(L, #{nodes := _}) when is_list(L), L =/= [] ->
    case lists:all(fun(X) -> is_pid(X) orelse is_atom(X) end, proper(L)) of
        true -> {ok, lists:usort(L)};
        false -> {error, {bad_process, L, "expected pids, registered names (atoms), "
                          "or all, new, existing"}}
    end;
processes(P, _Opts) ->
    processes(P).

proper(L) ->
    try length(L) of
        _ -> L
    catch
        error:badarg -> [{improper}]
    end.

processes(P) when P =:= all; P =:= new; P =:= existing ->
    {ok, P};
processes(P) when is_pid(P); is_atom(P) ->
    processes([P]);
processes([]) ->
    {error, {bad_process, [], "no processes given, for example [self(), my_server]"}};
processes(L) when is_list(L) ->
    case io_lib:printable_unicode_list(L) of
        true -> {error, {bad_process, L, "expected a pid, a registered name (an atom), "
                         "a list of them, or all, new, existing"}};
        false -> process_list(L)
    end;
processes(P) ->
    {error, {bad_process, P, "expected a pid, a registered name, a list of "
             "them, or all, new, existing"}}.

process_list(L) ->
    try {ok, lists:usort(each_process(L, L))}
    catch throw:{bad_process, _, _} = E -> {error, E}
    end.

each_process([P | T], L) ->
    [process(P) | each_process(T, L)];
each_process([], _L) ->
    [];
each_process(_Tail, L) ->
    throw({bad_process, L, "expected a proper list of pids and registered names"}).

process(P) when is_pid(P), node(P) =:= node() ->
    case is_process_alive(P) of
        true -> P;
        false -> throw({bad_process, P, "the process is not alive"})
    end;
process(P) when is_pid(P) ->
    throw({bad_process, P, "the process is on another node; trace it there"});
process(Name) when is_atom(Name) ->
    case whereis(Name) of
        P when is_pid(P) -> P;
        _ -> throw({bad_process, Name,
                    lists:flatten(io_lib:format("no process is registered as ~tw",
                                                [Name]))})
    end;
process(P) ->
    throw({bad_process, P, "expected a pid or a registered name"}).

%% The syntax of the lines: auto is Elixir's when the shell is iex.
syntax(#{syntax := auto} = O) ->
    O#{syntax := case tracekit_ex:iex() of
                     true -> elixir;
                     false -> erlang
                 end};
syntax(O) ->
    O.

in_procs(all, _O) -> " in all processes";
in_procs(Procs, O) -> [" in ", procs_text(Procs, O)].

procs_text(all, _O) -> "all processes";
procs_text(new, _O) -> "new processes";
procs_text(existing, _O) -> "existing processes";
procs_text(Procs, O) ->
    Pids = [P || P <- Procs, is_pid(P)],
    FOpts = (maps:with([syntax], O))#{names => tracekit_format:names(Pids)},
    lists:join(", ", [case P of
                          _ when is_pid(P) -> tracekit_format:pid(P, FOpts);
                          _ when map_get(syntax, O) =:= elixir -> tracekit_format:term(P, FOpts);
                          _ -> atom_to_list(P)
                      end || P <- Procs]).

