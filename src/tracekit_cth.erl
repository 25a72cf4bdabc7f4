%% @doc A Common Test hook that keeps a flight recorder of each test case
%% and writes it out when the case fails.
%%
%% ```
%% suite() ->
%%     [{ct_hooks, [{tracekit_cth, #{calls => ["my_server:handle_call -> return"],
%%                                  processes => [testcase, my_server],
%%                                  messages => true}}]}].
%% '''
%%
%% For each test case it records the last `events' trace events into an
%% `overwrite' {@link tracekit_ring}, in a trace session of its own, from
%% the end of `init_per_testcase' to the start of `end_per_testcase'.
%% When the case fails (or always, with `always => true'), it writes the
%% events of the case body (from the call of the case function to its
%% return, its exception, or the exit of the test case process when a
%% timetrap kills it) next to the case's log: `<case log>.tracekit.txt' (one
%% line per event), `<case log>.tracekit.html' (the {@link tracekit_report}
%% of those events: summary, sequence diagram, timeline, event table)
%% and, when messages or seq_trace were traced, Mermaid
%% sequence diagrams `<case log>.tracekit.messages.mmd' and
%% `<case log>.tracekit.seq.mmd', and links them from the case's log.
%% Passing cases leave nothing behind. The hook never fails a test: its
%% own errors are logged. With no options (`{ct_hooks, [tracekit_cth]}')
%% it records the messages, process events and seq_trace flow of the test
%% case process, and says once, in the log of the suite, what it records.
%%
%% Options (a map; all optional):
%% <dl>
%% <dt>`calls'</dt><dd>call specs as for {@link tracekit:calls/2}, traced
%%   in every process.</dd>
%% <dt>`processes'</dt><dd>whose messages and process events to trace:
%%   pids, registered names, and `testcase' for the test case process
%%   (default `[testcase]'). Names are looked up when the case starts.</dd>
%% <dt>`messages'</dt><dd>trace their sends and receives (default
%%   true).</dd>
%% <dt>`procs'</dt><dd>trace their process events (default true).</dd>
%% <dt>`seq_trace'</dt><dd>put a seq_trace token on the test case process
%%   and record the messages it leads to (default true). This uses the
%%   node's one system seq tracer while the case runs.</dd>
%% <dt>`events'</dt><dd>how many of the last events to keep (default
%%   1000).</dd>
%% <dt>`ring_size'</dt><dd>bytes of the ring per scheduler (default 1
%%   MiB).</dd>
%% <dt>`always'</dt><dd>write the files for passing cases too (default
%%   false).</dd>
%% <dt>`depth', `line_length'</dt><dd>as for {@link tracekit_format}.</dd>
%% <dt>`records'</dt><dd>`true' (default): in the text file, tuples that
%%   are records of the suite, of the modules of `calls' and of those the
%%   events touch print as records (see {@link tracekit}); `[Module]'
%%   reads those modules too; `false' prints tuples. The text file also
%%   shows references as short tags and a message seen by both process
%%   tracing and seq_trace as one line, with the seq_trace serial.</dd>
%% <dt>`nodes'</dt><dd>record on other nodes too: a list of nodes, or
%%   `all' for every node connected when the case starts and every node
%%   that connects while it runs (a `peer' started by the case, from when
%%   the hook notices it). Each node needs tracekit in its code path; one
%%   that has not is left out, and said so in the trace file. The events
%%   of all nodes are merged by their timestamps into one trace, each line
%%   beginning with its node; seq_trace flows across nodes show in the
%%   diagram (each node's system seq tracer is used).</dd>
%% <dt>`latency'</dt><dd>call specs as for {@link tracekit:latency/2}:
%%   the latency of those calls is measured in every process while the
%%   case runs, and the files of a failing case get the slowest of those
%%   functions (by their slowest call): a table in the text file, a
%%   Latency section in the HTML report (a log-scaled histogram per
%%   function).</dd>
%% <dt>`slowest'</dt><dd>how many of those functions (default 10).</dd>
%% <dt>`groups', `testcases'</dt><dd>maps from a group or test case name
%%   to options that apply there on top of the others.</dd>
%% </dl>
%% A test case can also change them in its config: `{tracekit, Opts}'
%% returned by `init_per_suite', `init_per_group' or `init_per_testcase'
%% applies on top (the nearest wins), and `{tracekit, false}' turns the
%% recording off.
-module(tracekit_cth).

-export([id/1, init/2, post_init_per_testcase/5, pre_end_per_testcase/4,
         post_end_per_testcase/5, on_tc_fail/4, on_tc_skip/4, terminate/1]).
-export([check_options/1]).

-export_type([opts/0]).

-type opts() :: #{calls => tracekit_spec:spec(),
                  processes => [pid() | atom()],
                  messages => boolean(),
                  procs => boolean(),
                  seq_trace => boolean(),
                  events => pos_integer(),
                  ring_size => pos_integer(),
                  always => boolean(),
                  depth => pos_integer(),
                  line_length => pos_integer(),
                  records => boolean() | [module()],
                  nodes => all | [node()],
                  latency => tracekit_spec:spec(),
                  slowest => pos_integer(),
                  groups => #{atom() => opts()},
                  testcases => #{atom() => opts()}}.

-define(DEFAULTS, #{calls => [], processes => [testcase], messages => true,
                    procs => true, seq_trace => true, events => 1000,
                    ring_size => 1 bsl 20, always => false, depth => 20,
                    line_length => 240, records => true, latency => [], slowest => 10}).
-define(KEYS, [calls, processes, messages, procs, seq_trace, events,
               ring_size, always, depth, line_length, records, nodes, latency, slowest,
               groups, testcases]).

%% What is being recorded for the running case, and what waits to be
%% written if the case turns out to have failed.
-record(state, {opts :: map(),
                current = none :: none | #{atom() => term()},
                pending = none :: none | {atom(), map()}}).

%% @private
-spec id(term()) -> tracekit_cth.
id(_Opts) ->
    tracekit_cth.

%% @private
-spec init(term(), term()) -> {ok, #state{}}.
init(_Id, Opts) when is_map(Opts) ->
    say_what(Opts),
    {ok, #state{opts = Opts}};
init(Id, Opts) when is_list(Opts) ->
    try maps:from_list(Opts) of
        Map -> init(Id, Map)
    catch
        error:badarg -> ignore(Opts)
    end;
init(_Id, Opts) ->
    ignore(Opts).

ignore(Opts) ->
    log_error("ignoring the options ~0tP: they must be a map", [Opts, 10]),
    {ok, #state{opts = #{}}}.

%% What the hook records in every case (groups and cases may change it):
%% said once, when it starts.
say_what(Opts) ->
    case check_options(maps:without([groups, testcases], Opts)) of
        {ok, #{calls := Calls, processes := Ps, messages := M, procs := P, seq_trace := Seq,
               events := N} = O} ->
            What = [["the messages" || M], ["the process events" || P]],
            Of = [case X of testcase -> "the test case process"; _ -> io_lib:format("~0tp", [X]) end
                  || X <- Ps],
            Parts = [[lists:join(" and ", [W || W <- What, W =/= []]), " of ",
                      lists:join(", ", Of)] || M orelse P]
                ++ [io_lib:format("the calls of ~ts", [lists:join(", ", [io_lib:format("~0tp", [C]) || C <- calls_list(Calls)])])
                    || Calls =/= []]
                ++ ["the seq_trace flow the test case process starts" || Seq],
            Where = case O of #{nodes := Nodes} -> io_lib:format(" on this node and ~0tp", [Nodes]);
                              _ -> "" end,
            info("tracekit_cth records in each test case ~ts~ts (the last ~w events), and "
                 "writes them beside the case's log when it fails",
                 [lists:join("; ", Parts), Where, N]);
        {error, _} ->
            ok                                  % said for each case
    end.

calls_list(L) when is_list(L) ->
    case io_lib:printable_unicode_list(L) of
        true -> [L];
        false -> L
    end;
calls_list(C) ->
    [C].

info(Fmt, Args) ->
    Text = io_lib:format(Fmt, Args),
    try ct:log("~ts", [Text])
    catch _:_ -> logger:info("~ts", [Text])
    end.

%% @private
post_init_per_testcase(Suite, TC, Config, Return, State) ->
    St = guarded(fun() -> start_case(Suite, TC, Config, Return, State) end, State),
    {Return, St}.

%% @private
pre_end_per_testcase(_Suite, _TC, Config, State) ->
    St = guarded(fun() -> stop_recorder(State) end, State),
    {Config, St}.

%% @private
post_end_per_testcase(Suite, TC, _Config, Result, State) ->
    St = guarded(fun() -> end_case(Suite, TC, Result, State) end, State),
    {Result, St}.

%% @private
on_tc_fail(_Suite, TC0, _Reason, State) ->
    TC = case TC0 of {Name, _Group} -> Name; Name -> Name end,
    guarded(fun() ->
                    case State#state.pending of
                        {TC, Rec} -> write(Rec, failed), State#state{pending = none};
                        _ -> State
                    end
            end, State).

%% @private
on_tc_skip(_Suite, _TC, _Reason, State) ->
    State#state{pending = none}.

%% @private
terminate(#state{current = Cur}) ->
    case Cur of
        #{} -> stop_traces(Cur);
        _ -> ok
    end.

%% The case's recording and latency trace, stopped (their summaries left
%% unread).
stop_traces(Cur) ->
    _ = [tracekit:stop(T) || K <- [recorder, latency_trace], T <- [maps:get(K, Cur, none)],
                             is_pid(T)],
    ok.

guarded(Fun, State) ->
    try Fun()
    catch Class:Why:Stack ->
            log_error("~tp:~tp~n~tp", [Class, Why, Stack]),
            State
    end.

log_error(Fmt, Args) ->
    Text = io_lib:format("tracekit_cth: " ++ Fmt, Args),
    try ct:log("~ts", [Text])
    catch _:_ -> logger:error("~ts", [Text])
    end.

%%% Recording -----------------------------------------------------------------

%% Return is ok when init_per_testcase let the case run (and Config is
%% what it returned); else the case is skipped or failed, and nothing is
%% recorded.
start_case(_Suite, _TC, _Config, Return, St) when Return =/= ok ->
    drop_current(St#state{pending = none});
start_case(Suite, TC, Cfg, ok, #state{opts = Base} = St0) ->
    St = drop_current(St0#state{pending = none}),
    case case_opts(Base, TC, Cfg) of
        off ->
            St;
        {error, Why} ->
            log_error("not recording ~tw: ~ts", [TC, Why]),
            St;
        {ok, Opts} ->
            Mark = {Suite, TC, 1},
            Latency = latency(Opts, TC),
            case tracekit_case:record(Opts, Mark) of
                nothing when Latency =:= none ->
                    St;
                {error, Why} ->
                    log_error("not recording ~tw: ~tp", [TC, Why]),
                    _ = [tracekit:stop(Latency) || is_pid(Latency)],
                    St;
                Recording ->
                    R = case Recording of
                            {ok, Pid} -> Pid;
                            nothing -> none
                        end,
                    %% The token after the recording is started: the
                    %% recording's own messages are not part of the flow.
                    tracekit_case:seq_token(Opts),
                    St#state{current = #{suite => Suite, tc => TC,
                                         recorder => R, latency_trace => Latency,
                                         opts => Opts,
                                         tc_pid => self(), mark => Mark,
                                         names => tracekit_case:start_names(Opts),
                                         logfile => proplists:get_value(tc_logfile, Cfg)}}
            end
    end.

drop_current(#state{current = none} = St) -> St;
drop_current(#state{current = Cur} = St) ->
    ok = stop_traces(Cur),
    St#state{current = none}.

%% The latency trace of a case (with `latency'), or none. It goes on when
%% the test case process is killed, as the recording does.
latency(#{latency := []}, _TC) ->
    none;
latency(#{latency := Specs} = Opts, TC) ->
    case tracekit:latency_trace(Specs, #{print => false, max_time => infinity},
                                maps:merge(#{watch => false}, tracekit_case:nodes_opts(Opts))) of
        {ok, T} ->
            T;
        {error, Why} ->
            log_error("not measuring the latency of ~tw: ~tp", [TC, Why]),
            none
    end.

%% The options of one case: the hook's, then its groups' (outermost
%% first), then its own, then what its config says.
case_opts(Base, TC, Config) ->
    Groups = [G || Props <- lists:reverse(proplists:get_value(tc_group_path, Config, []))
                       ++ [proplists:get_value(tc_group_properties, Config, [])],
                   {name, G} <- Props],
    Layers = [Base]
        ++ [maps:get(G, maps:get(groups, Base, #{}), #{}) || G <- Groups]
        ++ [maps:get(TC, maps:get(testcases, Base, #{}), #{}),
            proplists:get_value(tracekit, Config, #{})],
    case lists:member(false, Layers) of
        true -> off;
        false ->
            case [L || L <- Layers, not is_map(L)] of
                [] ->
                    check_options(lists:foldl(fun(L, Acc) -> maps:merge(Acc, L) end,
                                              #{}, Layers));
                [Bad | _] ->
                    {error, io_lib:format("options must be a map, got ~0tP", [Bad, 10])}
            end
    end.

%% @doc Checks the options of the hook (see the module's description)
%% and fills in the defaults; `{error, Why}' says what is wrong. The
%% hook does this for each test case, and logs the reason instead of
%% recording when it finds one.
-spec check_options(term()) -> {ok, opts()} | {error, string()}.
check_options(Opts) when is_map(Opts) ->
    case [K || K := _ <- Opts, not lists:member(K, ?KEYS)] of
        [] ->
            case [Why || K := V <- Opts, Why <- [option_problem(K, V)], Why =/= ok] of
                [] -> {ok, maps:merge(?DEFAULTS, Opts)};
                [Why | _] -> {error, lists:flatten(Why)}
            end;
        Unknown ->
            {error, lists:flatten(io_lib:format("unknown options ~0tP (known: ~tw)",
                                                [Unknown, 10, ?KEYS]))}
    end;
check_options(Opts) ->
    {error, lists:flatten(io_lib:format("options must be a map, got ~0tP", [Opts, 10]))}.

option_problem(K, V) when K =:= messages; K =:= procs; K =:= seq_trace; K =:= always ->
    valid(K, is_boolean(V), "true or false");
option_problem(K, V) when K =:= events; K =:= depth ->
    valid(K, is_integer(V) andalso V > 0, "a positive integer");
option_problem(line_length, V) ->
    valid(line_length, is_integer(V) andalso V >= 20, "an integer of at least 20");
option_problem(ring_size, V) ->
    case tracekit_ring:check_option(size, V) of
        ok -> ok;
        {error, Why} -> ["ring_size: ", Why]
    end;
option_problem(processes, V) ->
    valid(processes, is_list(V) andalso is_proper(V)
          andalso lists:all(fun(P) -> is_pid(P) orelse is_atom(P) end, V),
          "a list of pids, registered names and testcase");
option_problem(K, V) when K =:= groups; K =:= testcases ->
    valid(K, is_map(V) andalso lists:all(fun(O) -> is_map(O) orelse O =:= false end,
                                         maps:values(V)),
          "a map from names to options (maps, or false)");
option_problem(nodes, V) ->
    valid(nodes, V =:= all orelse (is_list(V) andalso is_proper(V)
                                   andalso lists:all(fun is_atom/1, V)),
          "all or a list of node names");
option_problem(records, V) ->
    valid(records, is_boolean(V) orelse (is_list(V) andalso is_proper(V)
                                         andalso lists:all(fun is_atom/1, V)),
          "true, false or a list of modules");
option_problem(slowest, V) ->
    valid(slowest, is_integer(V) andalso V > 0, "a positive integer");
option_problem(K, _) when K =:= calls; K =:= latency ->
    ok.                                 % tracekit_spec says what is wrong

valid(_K, true, _What) -> ok;
valid(K, false, What) -> io_lib:format("~tw must be ~ts", [K, What]).

is_proper(L) ->
    try length(L) of
        _ -> true
    catch
        error:badarg -> false
    end.

stop_recorder(#state{current = #{recorder := R, tc := TC} = Cur} = St)
  when not is_map_key(events, Cur) ->
    _ = case Cur of
            #{tc_pid := Pid} when Pid =:= self() -> seq_trace:set_token([]);
            _ -> ok
        end,
    Latency = case maps:get(latency_trace, Cur, none) of
                  none -> #{};
                  L -> case tracekit:stop(L) of
                           {ok, #{histograms := H} = LS} ->
                               #{latency => H, latency_counters => maps:get(counters, LS),
                                 latency_seconds => maps:get(seconds, LS)};
                           {error, LWhy} ->
                               log_error("the latency trace of ~tw was gone: ~tp", [TC, LWhy]),
                               #{}
                       end
              end,
    case R of
        none ->
            St#state{current = maps:merge(Cur, Latency#{events => [], lost => 0})};
        _ ->
            case tracekit:stop(R) of
                {ok, Summary} ->
                    St#state{current = maps:merge(maps:merge(Cur, tracekit_case:recorded(Summary)),
                                                  Latency)};
                {error, Why} ->
                    log_error("the recorder of ~tw was gone: ~tp", [TC, Why]),
                    St#state{current = none}
            end
    end;
stop_recorder(St) ->
    St.

end_case(_Suite, TC, Result, St0) ->
    case stop_recorder(St0) of
        #state{current = #{tc := TC, events := _, opts := #{always := Always}} = Rec} = St ->
            St1 = St#state{current = none},
            case Always of
                true -> write(Rec, outcome(Result)), St1;
                false -> St1#state{pending = {TC, Rec}}
            end;
        St ->
            St#state{current = none}
    end.

outcome(ok) -> passed;
outcome({error, _}) -> failed;
outcome({fail, _}) -> failed;
outcome({failed, _}) -> failed;
outcome({timetrap_timeout, _}) -> failed;
outcome({skip, _}) -> skipped;
outcome({skipped, _}) -> skipped;
outcome(_) -> passed.

%%% Writing -------------------------------------------------------------------

write(#{logfile := undefined, tc := TC}, _Outcome) ->
    log_error("no log file known for ~tw: the trace is not written", [TC]);
write(#{logfile := Log, suite := Suite, tc := TC} = Rec, Outcome) ->
    Base = filename:rootname(Log) ++ ".tracekit",
    {N, Files, Problems} = tracekit_case:write(Base, Rec#{title => io_lib:format("~tw:~tw", [Suite, TC]),
                                                         records => Suite}, Outcome),
    _ = [log_error("the HTML report of ~tw was not written: ~0tp", [TC, Why])
         || {_, Why} <- Problems],
    Links = [html_link(F, Text) || {F, Text} <- Files],
    ct:log("tracekit: ~w events of ~tw recorded: ~ts",
           [N, TC, lists:join(", ", Links)]).

html_link(File, Text) ->
    io_lib:format("<a href=\"~ts\">~ts</a>", [filename:basename(File), Text]).
