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
            case record(Opts, Mark) of
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
                    seq_token(Opts),
                    St#state{current = #{suite => Suite, tc => TC,
                                         recorder => R, latency_trace => Latency,
                                         opts => Opts,
                                         tc_pid => self(), mark => Mark,
                                         names => start_names(Opts),
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
                                maps:merge(#{watch => false}, nodes_opts(Opts))) of
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

%% Starts the recording of a case: a trace (tracekit_trace, as the
%% shell's) that keeps the last `events' events in overwrite rings, goes
%% on when the test case process is killed, and also records the calls,
%% returns and exceptions of the case function (Mark) in the test case
%% process with its process events, to find where the case body begins
%% and ends.
record(#{calls := Calls, messages := M, procs := P, seq_trace := Seq} = Opts, Mark) ->
    case Calls =:= [] andalso not M andalso not P andalso not Seq of
        true ->
            nothing;
        false ->
            maybe
                {ok, Resolved} ?= case Calls of
                                      [] -> {ok, []};
                                      _ -> tracekit_spec:resolve(Calls)
                                  end,
                Procs = lists:usort([Pid || X <- maps:get(processes, Opts), Pid <- [proc(X)],
                                            is_pid(Pid), is_process_alive(Pid)]),
                Flags = [send || M] ++ ['receive' || M] ++ [procs || P],
                Plan = #{procs => [{Procs, [timestamp | Flags]} || Flags =/= [], Procs =/= []]
                             ++ [{all, [call, timestamp]} || Resolved =/= []]
                             ++ [{[self()], [call, procs, timestamp]}],
                         calls => [{MFA, MS, local} || {#{match_spec := MS}, MFAs} <- Resolved,
                                                       MFA <- MFAs]
                             ++ [{Mark, [{'_', [], [{exception_trace}]}], local}],
                         seq_trace => Seq},
                Trace = #{print => false, watch => false, keep => {last, maps:get(events, Opts)},
                          max_events => infinity, max_time => infinity, rate => none,
                          ring_size => maps:get(ring_size, Opts), payload => full,
                          policy => overwrite},
                tracekit_trace:start(Plan, maps:merge(Trace, nodes_opts(Opts)))
            end
    end.

%% With `nodes': every node named (those that cannot take part are left
%% out, and said so), or with `all' every node connected now or later.
nodes_opts(#{nodes := all}) ->
    #{nodes => all, follow => true, bad_node => skip};
nodes_opts(#{nodes := Nodes}) ->
    #{nodes => lists:usort([node() | Nodes]), bad_node => skip};
nodes_opts(_) ->
    #{}.

%% What a recording gives back: the events kept (oldest first), how many
%% were lost (overwritten, dropped, or given way), and with `nodes' the
%% nodes recorded on and those left out with the reason.
recorded(#{events := Events, dropped := Lost} = Summary) ->
    case Summary of
        #{nodes := Nodes} ->
            #{events => Events, lost => Lost,
              nodes => lists:sort([N || N := #{state := S} <- Nodes, not is_failed(S)]),
              failed => lists:sort([{N, Why} || N := #{state := {failed, Why}} <- Nodes])};
        _ ->
            #{events => Events, lost => Lost}
    end.

is_failed({failed, _}) -> true;
is_failed(_) -> false.

%% Names of the processes to trace, as they are when the case starts
%% (they may be gone when the trace is written); the test case process
%% is `testcase'.
start_names(#{processes := Ps}) ->
    maps:from_list([{self(), testcase}
                    | [{Pid, Name} || Name <- Ps, is_atom(Name), Name =/= testcase,
                                      Pid <- [whereis(Name)], is_pid(Pid)]]).

proc(testcase) -> self();
proc(P) when is_pid(P) -> P;
proc(Name) when is_atom(Name) -> whereis(Name);
proc(_) -> undefined.

seq_token(#{seq_trace := true}) ->
    _ = seq_trace:set_token(label, erlang:unique_integer([positive]) band 16#FFFFFF),
    _ = [seq_trace:set_token(F, true) || F <- [send, 'receive', timestamp]],
    ok;
seq_token(_) ->
    ok.

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
                    St#state{current = maps:merge(maps:merge(Cur, recorded(Summary)), Latency)};
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

%% With `nodes', each line begins with its event's node.
node_prefix(E, #{nodes := _}) -> [atom_to_list(event_node(E)), " "];
node_prefix(_, _) -> "".

%% The node where an event happened: its process's, or for a seq_trace
%% event the sender's (send, print) or the receiver's.
event_node({seq_trace, _, Info}) -> info_node(Info);
event_node({seq_trace, _, Info, _}) -> info_node(Info);
event_node(E) when tuple_size(E) >= 2 ->
    case element(2, E) of
        P when is_pid(P); is_port(P) -> node(P);
        _ -> node()
    end.

info_node({'receive', _, _, To, _}) when is_pid(To) -> node(To);
info_node({_, _, From, _, _}) when is_pid(From) -> node(From);
info_node(_) -> node().

nodes_line(#{nodes := Nodes} = Rec) ->
    io_lib:format("recorded on ~ts~ts~n",
                  [lists:join(", ", [atom_to_list(N) || N <- Nodes]),
                   [io_lib:format("; not on ~ts (~0tP)", [atom_to_list(N), Why, 8])
                    || {N, Why} <- maps:get(failed, Rec, [])]]);
nodes_line(_) ->
    "".

write(#{logfile := undefined, tc := TC}, _Outcome) ->
    log_error("no log file known for ~tw: the trace is not written", [TC]);
write(#{logfile := Log, suite := Suite, tc := TC, events := All, lost := Lost,
        opts := Opts, tc_pid := TcPid, mark := Mark, names := StartNames} = Rec, Outcome) ->
    Base = filename:rootname(Log) ++ ".tracekit",
    Events = body(All, TcPid, Mark, maps:get(procs, Opts)
                                     andalso lists:member(testcase, maps:get(processes, Opts))),
    Names = maps:merge(tracekit_format:names(pids(Events)), StartNames),
    FOpts = #{depth => maps:get(depth, Opts), line_length => maps:get(line_length, Opts),
              names => Names},
    Header = io_lib:format("tracekit trace of ~tw:~tw (~w): ~w events of the test "
                           "case body (~w earlier events lost)~n~ts",
                           [Suite, TC, Outcome, length(Events), Lost, nodes_line(Rec)]),
    TextOpts = text_opts(Suite, Events, Opts, FOpts),
    Lines = [[node_prefix(E, Opts), Line, $\n]
             || {E, Line} <- tracekit_format:events(Events, TextOpts)],
    ok = file:write_file(Base ++ ".txt", unicode:characters_to_binary([Header, Lines,
                                                                      slowest_text(Rec)])),
    Diagrams = [diagram(Base ++ ".messages.mmd", "messages",
                        message_arrows(Events), Names, FOpts)
                || maps:get(messages, Opts)]
        ++ [diagram(Base ++ ".seq.mmd", "seq_trace", seq_arrows(Events), Names, FOpts)
            || maps:get(seq_trace, Opts)],
    Report = report(Base ++ ".html", Events, Suite, TC, Outcome, Lost, Names,
                    TextOpts#{latency => maps:get(latency, Rec, none),
                              slowest => maps:get(slowest, Opts)}),
    Links = [html_link(F, Text) || {F, Text} <- [{Base ++ ".txt", "events"} | Report] ++ Diagrams],
    ct:log("tracekit: ~w events of ~tw recorded: ~ts",
           [length(Events), TC, lists:join(", ", Links)]).

%% The text file's options: records (of the suite, the modules of the
%% calls traced, those the events touch, and those asked for), short
%% references, one line per message seen by both process tracing and
%% seq_trace.
text_opts(Suite, Events, Opts, FOpts) ->
    FOpts1 = FOpts#{short_refs => true, merge_seq => true},
    case maps:get(records, Opts) of
        false ->
            FOpts1;
        R ->
            Asked = [M || is_list(R), M <- R, code:ensure_loaded(M) =:= {module, M}],
            Traced = case tracekit_spec:parse(maps:get(calls, Opts)) of
                         {ok, Cs} -> [M || #{module := M} <- Cs];
                         {error, _} -> []
                     end,
            Cache = lists:foldl(fun tracekit_records:learn/2,
                                tracekit_records:new([Suite | Traced] ++ Asked), Events),
            FOpts1#{records => tracekit_records:defs(Cache)}
    end.

%% The events from the call of the test case function to its return, its
%% exception or the exit of the test case process (killed by a timetrap).
%% All of them when the call is not among them (overwritten by later
%% events). The process events of the test case process were recorded
%% for the exit: they stay only when asked for (`Procs').
body(Events, Pid, {M, F, A}, Procs) ->
    IsCall = fun(E) -> mark(E, Pid) =:= {call, {M, F, A}} end,
    Body = case lists:splitwith(fun(E) -> not IsCall(E) end, Events) of
               {_, []} -> Events;
               {_, [Call | Rest]} -> [Call | upto_end(Rest, Pid, {M, F, A})]
           end,
    [E || E <- Body, Procs orelse not is_proc_event(E, Pid) orelse mark(E, Pid) =:= exit].

upto_end([], _, _) -> [];
upto_end([E | Es], Pid, MFA) ->
    case mark(E, Pid) of
        {return_from, MFA} -> [E];
        {exception_from, MFA} -> [E];
        exit -> [E];
        _ -> [E | upto_end(Es, Pid, MFA)]
    end.

mark(E, Pid) when element(1, E) =:= trace_ts, element(2, E) =:= Pid ->
    case element(3, E) of
        call -> {call, setelement(3, element(4, E), length(element(3, element(4, E))))};
        Tag when Tag =:= return_from; Tag =:= exception_from -> {Tag, element(4, E)};
        exit -> exit;
        _ -> none
    end;
mark(_, _) ->
    none.

is_proc_event(E, Pid) ->
    element(1, E) =:= trace_ts andalso element(2, E) =:= Pid andalso
        lists:member(element(3, E), [spawn, spawned, exit, link, unlink, getting_linked,
                                     getting_unlinked, register, unregister]).

%% The HTML report of the case (tracekit_report), its table printed as the
%% text file prints (records, short references); a failure to write it
%% is logged and leaves the other files.
report(File, Events, Suite, TC, Outcome, Lost, Names, FOpts) ->
    Title = io_lib:format("tracekit: ~tw:~tw (~w)", [Suite, TC, Outcome]),
    Note = io_lib:format("~w events of the test case body (~w earlier events lost)",
                         [length(Events), Lost]),
    Latency = case FOpts of
                  #{latency := none} -> #{};
                  #{latency := H, slowest := N} ->
                      #{latency => H, latency_opts => #{sort => max, max => N}}
              end,
    Opts = maps:merge(maps:with([depth, line_length, records, short_refs], FOpts),
                      Latency#{title => Title, note => Note, lost => Lost, names => Names}),
    case tracekit_report:write(Events, File, Opts) of
        {ok, _} ->
            [{File, "HTML report"}];
        {error, Why} ->
            log_error("the HTML report of ~tw was not written: ~0tp", [TC, Why]),
            []
    end.

%% The slowest functions of the case (by their slowest call), after its
%% events.
slowest_text(#{latency := H, opts := #{slowest := N, latency := Specs}} = Rec) ->
    C = maps:get(latency_counters, Rec, #{}),
    Secs = maps:get(latency_seconds, Rec, 0),
    View = #{functions => H, nodes => #{}, counters => C, seconds => Secs,
             previous => #{}, interval => Secs},
    ["\nslowest functions of the case, by their slowest call (tracekit:latency of ",
     spec_text(Specs), "; ", integer_to_list(maps:get(measured, C, 0)), " calls measured, ",
     integer_to_list(maps:get(unfinished, C, 0)), " unfinished):\n",
     tracekit_latency_view:lines(View, #{lines => N, sort => max})];
slowest_text(_) ->
    "".

spec_text(Specs) ->
    case tracekit_spec:parse(Specs) of
        {ok, Cs} -> lists:join(", ", [tracekit_spec:format(C) || C <- Cs]);
        {error, _} -> io_lib:format("~0tP", [Specs, 10])
    end.

html_link(File, Text) ->
    io_lib:format("<a href=\"~ts\">~ts</a>", [filename:basename(File), Text]).

diagram(File, What, Arrows, Names, FOpts) ->
    Labels = maps:map(fun(P, _) -> tracekit_format:pid(P, FOpts) end, Names),
    Text = tracekit_mermaid:sequence(Arrows, #{names => Labels#{untraced => "(untraced)"}}),
    ok = file:write_file(File, unicode:characters_to_binary(Text)),
    {File, "Mermaid diagram of " ++ What}.

pids(Events) ->
    lists:usort([P || E <- Events, P <- tuple_to_list(E) ++ info(E), is_pid(P)]).

info({seq_trace, _, Info}) when is_tuple(Info) -> tuple_to_list(Info);
info({seq_trace, _, Info, _}) when is_tuple(Info) -> tuple_to_list(Info);
info(_) -> [].

%% Arrows of the messages seen by process tracing. A send to a pid is an
%% arrow; a send to a name goes to the process that has the name now; a
%% send to an alias goes to whoever receives the same message next. A
%% receive that matches no send seen (its sender was not traced) is an
%% arrow from `untraced'.
message_arrows(Events) ->
    {Arrows, _, _} = lists:foldl(fun message_arrow/2, {[], [], []}, Events),
    [{F, T, L} || {_, F, T, L} <- lists:reverse(Arrows)].

message_arrow(E, {Acc, Sent, Unknown} = State) when element(1, E) =:= trace;
                                                     element(1, E) =:= trace_ts ->
    N = length(Acc),
    case tuple_to_list(E) of
        [_, From, send, Msg, To | _] when is_pid(To) ->
            {[{N, From, To, label(Msg)} | Acc], [{To, Msg} | Sent], Unknown};
        [_, From, send, Msg, To | _] when is_atom(To) ->
            Dest = case whereis(To) of undefined -> To; P -> P end,
            {[{N, From, Dest, label(Msg)} | Acc], [{Dest, Msg} | Sent], Unknown};
        [_, From, send, Msg, To | _] ->
            {[{N, From, To, label(Msg)} | Acc], Sent, [{N, Msg} | Unknown]};
        [_, From, send_to_non_existing_process, Msg, To | _] ->
            {[{N, From, To, [label(Msg), " (no such process)"]} | Acc], Sent, Unknown};
        [_, To, 'receive', Msg | _] ->
            case lists:member({To, Msg}, Sent) of
                true ->
                    {Acc, lists:delete({To, Msg}, Sent), Unknown};
                false ->
                    case lists:keytake(Msg, 2, lists:reverse(Unknown)) of
                        {value, {I, _}, Rest} ->
                            {lists:keyreplace(I, 1, Acc, setelement(3, lists:keyfind(I, 1, Acc), To)),
                             Sent, lists:reverse(Rest)};
                        false ->
                            {[{N, untraced, To, label(Msg)} | Acc], Sent, Unknown}
                    end
            end;
        _ ->
            State
    end;
message_arrow(_, State) ->
    State.

%% Arrows of the seq_trace sends; a send to an alias or a name goes to the
%% process whose receive event has the same serial.
seq_arrows(Events) ->
    Infos = [I || E <- Events, I <- [seq_info(E)], I =/= none],
    Receivers = maps:from_list([{{Serial, From}, To}
                                || {'receive', Serial, From, To, _} <- Infos]),
    [{From, maps:get({Serial, From}, Receivers, To), label(Msg)}
     || {send, Serial, From, To, Msg} <- Infos].

seq_info({seq_trace, _, Info}) -> Info;
seq_info({seq_trace, _, Info, _}) -> Info;
seq_info(_) -> none.

label(Msg) ->
    tracekit_format:message_label(Msg, 80).
