%% The shell API (tracekit) on a real VM: what is printed, the limits, a
%% burst of a million events, exact drop accounting, cleanup at a limit,
%% on stop and when the caller dies, bad specs, and tracing side by side
%% with dbg.
-module(tracekit_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_testcase/2, end_per_testcase/2]).
-export([calls_print_one_line_each/1, exception_only_hides_returns/1,
         match_spec_patterns_select/1, messages_with_names/1, process_events/1,
         collect_instead_of_print/1, format_fun/1,
         burst_of_a_million_does_not_flood/1, drop_accounting_is_exact/1,
         rate_limit_stops/1, time_limit_stops/1,
         cleanup_at_limit/1, cleanup_on_stop/1, cleanup_when_caller_dies/1,
         cleanup_when_tracer_is_killed/1,
         stop_stops_only_the_callers_traces/1, bad_input_traces_nothing/1,
         own_processes_are_not_traced/1, side_by_side_with_dbg/1,
         match_spec_flag_actions/1, stop_and_wait_only_traces/1,
         cut_arguments_are_printed/1, printing_path_is_not_traced/1,
         bad_input_gives_clear_errors/1, io_device_that_does_not_answer/1,
         failing_format_fun/1, format_fun_that_hangs/1, slow_format_fun_and_max_time/1,
         format_fun_is_not_traced/1, two_traces_of_all_messages/1, many_record_modules/1,
         stop_while_lines_are_slow/1,
         file_holds_what_print_shows/1, file_limits/1, file_drop_accounting/1,
         file_bad_paths/1,
         caller_and_stack/1, records_of_the_modules_traced/1,
         records_of_a_module_without_debug_info/1, records_of_a_server/1,
         short_refs_in_calls/1, colour_when_asked/1, new_options_are_checked/1,
         maps_in_patterns_select/1, own_work_is_not_traced/1,
         strangers_messages_to_the_trace/1, strangers_messages_to_the_agent/1]).
%% Traced by the cases.
-export([double/1, boom/1, tick/1, handle/2, outer/1, middle/1]).
%% A server whose state is a record.
-export([init/1, handle_call/3, handle_cast/2]).

-behaviour(gen_server).

-record(tk_state, {count = 0, name}).
%% Run on a peer node by the cases.
-export([flag_action_traces/0]).

%% A case that blocks fails in a minute.
suite() ->
    [{timetrap, {minutes, 1}}].

all() ->
    [calls_print_one_line_each, exception_only_hides_returns,
     match_spec_patterns_select, messages_with_names, process_events,
     collect_instead_of_print, format_fun,
     burst_of_a_million_does_not_flood, drop_accounting_is_exact,
     rate_limit_stops, time_limit_stops,
     cleanup_at_limit, cleanup_on_stop, cleanup_when_caller_dies,
     cleanup_when_tracer_is_killed,
     stop_stops_only_the_callers_traces, bad_input_traces_nothing,
     own_processes_are_not_traced, side_by_side_with_dbg,
     match_spec_flag_actions, stop_and_wait_only_traces,
     cut_arguments_are_printed, printing_path_is_not_traced,
     bad_input_gives_clear_errors, io_device_that_does_not_answer,
     failing_format_fun, format_fun_that_hangs, slow_format_fun_and_max_time,
     format_fun_is_not_traced, two_traces_of_all_messages, many_record_modules,
     stop_while_lines_are_slow,
     file_holds_what_print_shows, file_limits, file_drop_accounting,
     file_bad_paths,
     caller_and_stack, records_of_the_modules_traced,
     records_of_a_module_without_debug_info, records_of_a_server,
     short_refs_in_calls, colour_when_asked, new_options_are_checked,
     maps_in_patterns_select, own_work_is_not_traced,
     strangers_messages_to_the_trace, strangers_messages_to_the_agent].

init_per_testcase(Case, Config) ->
    Io = tk_capture:start(),
    File = filename:join(?config(priv_dir, Config), atom_to_list(Case) ++ ".tkt"),
    [{io, Io}, {file, File}, {alive0, tracekit_ring:alive()} | Config].

end_per_testcase(_, Config) ->
    ok = tracekit:stop(),
    tk_capture:stop(?config(io, Config)),
    ok.

double(X) -> 2 * X.
boom(X) -> error({boom, X}).
tick(X) -> X.
handle(Req, State) -> {reply, Req, State}.

%% Calls that are not tail calls, so that each is on the stack.
outer(X) -> [middle(X)].
middle(X) -> [double(X)].

init(Name) -> {ok, #tk_state{name = Name}}.
handle_call({add, N}, _From, #tk_state{count = C} = S) ->
    {reply, C + N, S#tk_state{count = C + N}};
handle_call(get, _From, S) ->
    {reply, S, S}.
handle_cast(_, S) -> {noreply, S}.

ticks(N) -> ticks(1, N).
ticks(I, N) when I > N -> ok;
ticks(I, N) -> _ = tick(I), ticks(I + 1, N).

%% Starts a trace printing to the capture device of the case.
opts(Config, Opts) -> Opts#{io => ?config(io, Config)}.

contains(Text, Part) -> string:find(Text, Part) =/= nomatch.

%% The numbers of a summary line.
summary(Line) ->
    {match, [Shown, Dropped]} =
        re:run(Line, "^tracekit: ([0-9]+) events? shown, ([0-9]+) dropped;",
               [{capture, all_but_first, list}]),
    {list_to_integer(Shown), list_to_integer(Dropped)}.

tracekit_sessions() ->
    [S || {tracekit, _} = S <- trace:session_info(all)].

%% Nothing of tracekit is left: no session, every ring freed, the
%% function no longer traced.
assert_clean(Config, MFA) ->
    Alive0 = ?config(alive0, Config),
    %% No more rings than when the case began: a ring of an earlier case
    %% may be freed meanwhile (its last holder, say a format fun that
    %% hung, ends late on a slow VM), never one more kept.
    tk_collector:eventually(fun() ->
                       [erlang:garbage_collect(P) || P <- processes()],
                       tracekit_sessions() =:= [] andalso tracekit_ring:alive() =< Alive0
               end),
    ?assertEqual([], [S || {tracekit, _} = S <- trace:session_info(MFA)]).

%%% What is printed ------------------------------------------------------------

calls_print_one_line_each(Config) ->
    Io = ?config(io, Config),
    {ok, T} = tracekit:calls("tracekit_SUITE:double/1 -> return", opts(Config, #{})),
    ?assert(is_pid(T)),
    Self = pid_to_list(self()),
    42 = double(21),
    tracekit_SUITE:double(1),
    {ok, #{reason := stopped, shown := 4, dropped := 0}} = tracekit:stop(T),
    Lines = tk_capture:lines(Io),
    ct:log("~ts", [lists:join("\n", Lines)]),
    ?assertMatch([_, _, _, _, _, _], Lines),
    [Header, C1, R1, C2, R2, Summary] = Lines,
    ?assertEqual("tracekit: tracing calls to tracekit_SUITE:double/1 -> return in all "
                 "processes (stops after 100 events or 15000 ms)", Header),
    Time = "^[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} ",
    [?assertMatch({match, _}, re:run(L, Time)) || L <- [C1, R1, C2, R2]],
    ?assertEqual(Self ++ " tracekit_SUITE:double(21)", lists:nthtail(16, C1)),
    ?assertEqual(Self ++ " tracekit_SUITE:double/1 -> 42", lists:nthtail(16, R1)),
    ?assertEqual(Self ++ " tracekit_SUITE:double(1)", lists:nthtail(16, C2)),
    ?assertEqual("tracekit: 4 events shown, 0 dropped; stopped by tracekit:stop", Summary).

exception_only_hides_returns(Config) ->
    Io = ?config(io, Config),
    {ok, T} = tracekit:calls(["tracekit_SUITE:boom/1 -> exception",
                              "tracekit_SUITE:double/1 -> exception"], opts(Config, #{})),
    4 = double(2),
    try boom(7) catch error:{boom, 7} -> ok end,
    {ok, #{shown := 3}} = tracekit:stop(T),
    Lines = tk_capture:lines(Io),
    ct:log("~ts", [lists:join("\n", Lines)]),
    ?assertEqual(1, length([L || L <- Lines, contains(L, "tracekit_SUITE:double(2)")])),
    ?assertEqual(1, length([L || L <- Lines, contains(L, "tracekit_SUITE:boom(7)")])),
    ?assertEqual(1, length([L || L <- Lines,
                                 contains(L, "tracekit_SUITE:boom/1 raised error:{boom,7}")])),
    ?assertEqual([], [L || L <- tl(Lines), contains(L, " -> ")]).

match_spec_patterns_select(Config) ->
    {ok, T} = tracekit:calls("tracekit_SUITE:handle({get, K}, _) when is_atom(K) -> return",
                             opts(Config, #{print => false})),
    handle({get, a}, s1),
    handle({get, "a"}, s2),
    handle({put, a}, s3),
    handle({get, b}, s4),
    Self = self(),
    {ok, #{events := Events}} = tracekit:stop(T),
    ?assertMatch([{trace_ts, Self, call, {?MODULE, handle, [{get, a}, s1]}, _},
                  {trace_ts, Self, return_from, {?MODULE, handle, 2}, {reply, {get, a}, s1}, _},
                  {trace_ts, Self, call, {?MODULE, handle, [{get, b}, s4]}, _},
                  {trace_ts, Self, return_from, {?MODULE, handle, 2}, {reply, {get, b}, s4}, _}],
                 Events).

messages_with_names(Config) ->
    Io = ?config(io, Config),
    Server = spawn_link(fun Loop() -> receive {From, M} -> From ! {echo, M}, Loop() end end),
    register(tk_echo, Server),
    {ok, _} = tracekit:messages(tk_echo, opts(Config, #{max_events => 4})),
    [begin tk_echo ! {self(), {hello, I}}, receive {echo, _} -> ok end end
     || I <- [1, 2, 3]],
    Summary = tk_capture:wait_for(Io, "^tracekit: 4 events", 5000),
    Lines = tk_capture:lines(Io),
    ct:log("~ts", [lists:join("\n", Lines)]),
    S = pid_to_list(Server) ++ " (tk_echo)",
    Me = pid_to_list(self()),
    ?assertEqual("tracekit: tracing messages of " ++ S ++ " (stops after 4 events or 15000 ms)",
                 hd(Lines)),
    ?assertEqual([S ++ " << {" ++ Me ++ ",{hello,1}}",
                  S ++ " ! {echo,{hello,1}} -> " ++ Me,
                  S ++ " << {" ++ Me ++ ",{hello,2}}",
                  S ++ " ! {echo,{hello,2}} -> " ++ Me],
                 [lists:nthtail(16, L) || L <- lists:sublist(Lines, 2, 4)]),
    %% The third exchange is dropped, or not traced at all when the
    %% limit was seen before it happened.
    {4, Dropped} = summary(Summary),
    ?assert(Dropped =:= 0 orelse Dropped =:= 2),
    unlink(Server),
    exit(Server, kill).

process_events(Config) ->
    {ok, T} = tracekit:procs(new, opts(Config, #{print => false})),
    {P, Ref} = spawn_monitor(fun() ->
                                     register(tk_short_lived, self()),
                                     link(self()),
                                     exit(done)
                             end),
    receive {'DOWN', Ref, process, P, done} -> ok end,
    {ok, #{events := Events}} = tracekit:stop(T),
    Tags = [element(3, E) || E <- Events, element(2, E) =:= P],
    ?assertEqual([spawned, register, exit, unregister], Tags -- [link]),
    Lines = [lists:flatten(tracekit_format:event(E, #{})) || E <- Events],
    ct:log("~ts", [lists:join("\n", Lines)]),
    ?assert(lists:any(fun(L) -> contains(L, "registered as tk_short_lived") end, Lines)),
    ?assert(lists:any(fun(L) -> contains(L, "exited: done") end, Lines)).

collect_instead_of_print(Config) ->
    Io = ?config(io, Config),
    {ok, T} = tracekit:calls({?MODULE, double, 1}, opts(Config, #{print => false, max_events => 3})),
    Self = self(),
    [double(I) || I <- lists:seq(1, 5)],
    %% The summary comes as a message to the caller, with the events.
    receive
        {tracekit, T, done, Summary} ->
            ?assertMatch(#{reason := {max_events, 3}, shown := 3, dropped := D,
                           events := [{trace_ts, Self, call, {?MODULE, double, [1]}, _},
                                      {trace_ts, Self, call, {?MODULE, double, [2]}, _},
                                      {trace_ts, Self, call, {?MODULE, double, [3]}, _}]}
                           when D =< 2, Summary)
    after 5000 ->
            ct:fail(no_summary)
    end,
    ?assertEqual("", tk_capture:text(Io)),
    ?assertEqual({error, not_running}, tracekit:wait(T, 1000)).

format_fun(Config) ->
    Io = ?config(io, Config),
    Fun = fun({trace_ts, _, call, {_, _, [X]}, _}) -> io_lib:format("double of ~w", [X]) end,
    {ok, T} = tracekit:calls("tracekit_SUITE:double/1", opts(Config, #{format => Fun})),
    double(5),
    {ok, _} = tracekit:stop(T),
    ?assertMatch([_, "double of 5", _], tk_capture:lines(Io)).

%%% Limits and bursts --------------------------------------------------------

%% A million calls with the default limits: the shell gets the header, 100
%% lines and the summary; the rest is counted as dropped.
burst_of_a_million_does_not_flood(Config) ->
    Io = ?config(io, Config),
    {ok, _} = tracekit:calls("tracekit_SUITE:tick/1", opts(Config, #{})),
    N = 1000000,
    {Us, ok} = timer:tc(fun() -> ticks(N) end),
    Summary = tk_capture:wait_for(Io, "^tracekit: [0-9]", 10000),
    Lines = tk_capture:lines(Io),
    {Shown, Dropped} = summary(Summary),
    ct:log("~w calls in ~w ms; ~ts", [N, Us div 1000, Summary]),
    ?assertEqual(102, length(Lines)),
    ?assertEqual(100, length([L || L <- Lines, contains(L, "tracekit_SUITE:tick(")])),
    ?assertEqual(100, Shown),
    ?assert(Dropped > 0),
    ?assert(Shown + Dropped =< N),
    ?assert(contains(Summary, "stopped at the limit of 100 events")),
    %% The printer's mailbox and the shell's never grew.
    ?assertMatch({message_queue_len, L} when L < 10,
                 erlang:process_info(Io, message_queue_len)).

%% With no count limit and a tiny ring, most of a burst is refused by the
%% ring: what was shown and what was dropped add up to every call.
drop_accounting_is_exact(Config) ->
    Io = ?config(io, Config),
    N = 200000,
    {ok, T} = tracekit:calls("tracekit_SUITE:tick/1",
                             opts(Config, #{max_events => infinity, max_time => infinity,
                                            ring_size => 4096})),
    Self = self(),
    Burst = [spawn_link(fun() -> ticks(N div 4), Self ! {done, self()} end)
             || _ <- lists:seq(1, 4)],
    [receive {done, P} -> ok end || P <- Burst],
    {ok, #{reason := stopped, shown := Shown, dropped := Dropped}} = tracekit:stop(T),
    ct:log("shown ~w, dropped ~w", [Shown, Dropped]),
    ?assertEqual(N, Shown + Dropped),
    ?assert(Dropped > 0),
    ?assertEqual(Shown, length([L || L <- tk_capture:lines(Io),
                                     contains(L, "tracekit_SUITE:tick(")])).

rate_limit_stops(Config) ->
    {ok, T} = tracekit:calls("tracekit_SUITE:tick/1",
                             opts(Config, #{rate => {10, 1000}, print => false})),
    ticks(50),
    {ok, #{reason := Reason, shown := Shown, dropped := Dropped}} = tracekit:wait(T, 5000),
    ?assertEqual({rate, {10, 1000}}, Reason),
    ?assertEqual(10, Shown),
    ?assert(Dropped >= 1 andalso Shown + Dropped =< 50).

time_limit_stops(Config) ->
    T0 = erlang:monotonic_time(millisecond),
    {ok, T} = tracekit:calls("tracekit_SUITE:tick/1",
                             opts(Config, #{max_time => 300, print => false})),
    ticks(3),
    {ok, #{reason := {max_time, 300}, shown := 3, dropped := 0}} = tracekit:wait(T, 5000),
    Ms = erlang:monotonic_time(millisecond) - T0,
    ?assert(Ms >= 300 andalso Ms < 2000).

%%% Cleanup ------------------------------------------------------------------

cleanup_at_limit(Config) ->
    Io = ?config(io, Config),
    {ok, T} = tracekit:calls("tracekit_SUITE:tick/1", opts(Config, #{max_events => 5})),
    ?assertMatch([_], tracekit_sessions()),
    ?assertEqual(?config(alive0, Config) + 1, tracekit_ring:alive()),
    ticks(100),
    tk_capture:wait_for(Io, "^tracekit: 5 events", 5000),
    tk_collector:wait_dead([T]),
    assert_clean(Config, {?MODULE, tick, 1}),
    %% Tracing is really off: more calls print nothing.
    ticks(10),
    timer:sleep(50),
    ?assertEqual(7, length(tk_capture:lines(Io))).

cleanup_on_stop(Config) ->
    {ok, T} = tracekit:messages(self(), opts(Config, #{max_time => infinity})),
    ?assertMatch([_], tracekit_sessions()),
    ?assertMatch([{tracekit, _}], [S || {tracekit, _} = S <- trace:session_info(self())]),
    ok = tracekit:stop(),
    ?assertNot(is_process_alive(T)),
    assert_clean(Config, {?MODULE, tick, 1}),
    ?assertEqual([], [S || {tracekit, _} = S <- trace:session_info(self())]).

cleanup_when_caller_dies(Config) ->
    Io = ?config(io, Config),
    Self = self(),
    Caller = spawn(fun() ->
                           {ok, T} = tracekit:calls("tracekit_SUITE:tick/1",
                                                    #{io => Io, max_time => infinity}),
                           Self ! {started, T},
                           receive die -> exit(crashed) end
                   end),
    T = receive {started, Pid} -> Pid end,
    ticks(2),
    ?assertMatch([_], tracekit_sessions()),
    Caller ! die,
    tk_collector:wait_dead([T]),
    Summary = tk_capture:wait_for(Io, "^tracekit: [0-9]", 5000),
    ?assertEqual("tracekit: 2 events shown, 0 dropped; stopped: the process that "
                 "started the trace exited", Summary),
    assert_clean(Config, {?MODULE, tick, 1}).

%% Even when the printer process is killed, the session goes with its
%% handle and the ring with its last reference.
cleanup_when_tracer_is_killed(Config) ->
    {ok, T} = tracekit:calls("tracekit_SUITE:tick/1", opts(Config, #{max_time => infinity})),
    ticks(2),
    exit(T, kill),
    tk_collector:wait_dead([T]),
    assert_clean(Config, {?MODULE, tick, 1}).

stop_stops_only_the_callers_traces(Config) ->
    Io = ?config(io, Config),
    Self = self(),
    Other = spawn_link(fun() ->
                               {ok, T} = tracekit:calls("tracekit_SUITE:double/1",
                                                        #{io => Io, print => false}),
                               Self ! {other, T},
                               receive stop -> Self ! {other_done, tracekit:stop(T)} end
                       end),
    OtherT = receive {other, P} -> P end,
    {ok, A} = tracekit:calls("tracekit_SUITE:tick/1", opts(Config, #{})),
    {ok, B} = tracekit:messages(self(), opts(Config, #{})),
    ?assertEqual(3, length(tracekit_sessions())),
    ok = tracekit:stop(),
    ?assertNot(is_process_alive(A)),
    ?assertNot(is_process_alive(B)),
    ?assert(is_process_alive(OtherT)),
    ?assertEqual(1, length(tracekit_sessions())),
    double(1),
    Other ! stop,
    receive {other_done, R} -> ?assertMatch({ok, #{shown := 1}}, R) end,
    assert_clean(Config, {?MODULE, double, 1}).

bad_input_traces_nothing(Config) ->
    Io = ?config(io, Config),
    Sessions = trace:session_info(all),
    Alive = tracekit_ring:alive(),
    Bad = [tracekit:calls("tracekit_SUITE:double(", opts(Config, #{})),
           tracekit:calls("tracekit_SUITE:double/1 -> retrun", opts(Config, #{})),
           tracekit:calls("tracekit_SUITE:nope/1", opts(Config, #{})),
           tracekit:calls("no_such_module_tk:f/1", opts(Config, #{})),
           tracekit:calls("tracekit_SUITE:double/1", opts(Config, #{max_events => 0})),
           tracekit:calls("tracekit_SUITE:double/1", opts(Config, #{colour => red})),
           tracekit:calls("tracekit_SUITE:double/1", [{max_events, 1}]),
           tracekit:calls("tracekit_SUITE:double/1", opts(Config, #{processes => no_such_name_tk})),
           tracekit:messages(no_such_name_tk, opts(Config, #{})),
           tracekit:messages([], opts(Config, #{})),
           tracekit:procs("x", opts(Config, #{}))],
    ct:log("~p", [Bad]),
    [?assertMatch({error, {Kind, _, Why}} when is_atom(Kind) andalso is_list(Why), B)
     || B <- Bad],
    ?assertMatch([{error, {bad_spec, _, _}}, {error, {bad_spec, _, _}},
                  {error, {bad_spec, _, _}}, {error, {bad_spec, _, _}},
                  {error, {bad_option, {max_events, 0}, _}},
                  {error, {bad_option, {colour, red}, _}},
                  {error, {bad_option, [{max_events, 1}], _}},
                  {error, {bad_process, no_such_name_tk, "no process is registered as no_such_name_tk"}},
                  {error, {bad_process, no_such_name_tk, _}},
                  {error, {bad_process, [], _}},
                  {error, {bad_process, "x", _}}], Bad),
    {error, {bad_spec, _, Why}} = hd(Bad),
    ?assert(contains(Why, "for example")),
    ?assertEqual(Sessions, trace:session_info(all)),
    ?assertEqual(Alive, tracekit_ring:alive()),
    ?assertEqual("", tk_capture:text(Io)),
    ?assertEqual([], [S || {tracekit, _} = S <- trace:session_info({?MODULE, double, 1})]).

%% The printer calls io:put_chars/2 for every line (the header is printed
%% after tracing is on): with every process traced, it would trace itself
%% until the limit. It and its io device are left out.
own_processes_are_not_traced(Config) ->
    Io = ?config(io, Config),
    %% Printing to the caller's group leader, as in the shell.
    GL = group_leader(),
    group_leader(Io, self()),
    {ok, T2} = try tracekit:calls("io:put_chars/2", #{max_events => 5})
               after group_leader(GL, self())
               end,
    timer:sleep(100),
    {ok, #{shown := Shown}} = tracekit:stop(T2),
    Lines = tk_capture:lines(Io),
    ct:log("~ts", [lists:join("\n", Lines)]),
    ?assertEqual(Shown + 2, length(Lines)),
    ?assertEqual([], [L || L <- Lines, contains(L, pid_to_list(T2) ++ " io:put_chars")]).

%%% Side by side with dbg ----------------------------------------------------

%% dbg (a process tracer in the legacy session) and tracekit (its own
%% session) trace the same process at the same time, calls and messages:
%% each gets every event.
side_by_side_with_dbg(Config) ->
    Self = self(),
    Worker = spawn_link(fun Loop() ->
                                receive
                                    {work, From, X} -> From ! {done, double(X)}, Loop();
                                    stop -> ok
                                end
                        end),
    Got = ets:new(dbg_events, [public, bag]),
    {ok, _} = dbg:tracer(process, {fun(E, N) -> ets:insert(Got, {N, E}), N + 1 end, 0}),
    {ok, _} = dbg:p(Worker, [c, m]),
    {ok, _} = dbg:tpl(?MODULE, double, 1, []),
    {ok, Calls} = tracekit:calls("tracekit_SUITE:double/1",
                                 opts(Config, #{processes => Worker, print => false})),
    {ok, Msgs} = tracekit:messages(Worker, opts(Config, #{print => false})),
    N = 20,
    [begin Worker ! {work, Self, I}, receive {done, _} -> ok end end || I <- lists:seq(1, N)],
    {ok, #{events := CallEvents, dropped := 0}} = tracekit:stop(Calls),
    {ok, #{events := MsgEvents, dropped := 0}} = tracekit:stop(Msgs),
    %% Every dbg event delivered, then dbg off.
    tk_collector:eventually(fun() -> length([x || {_, {trace, _, send, {done, _}, _}} <- ets:tab2list(Got)]) =:= N end),
    dbg:stop(),
    DbgEvents = [E || {_, E} <- lists:keysort(1, ets:tab2list(Got))],
    ets:delete(Got),
    Worker ! stop,
    ?assertEqual([{call, {?MODULE, double, [I]}} || I <- lists:seq(1, N)],
                 [{call, MFA} || {trace, P, call, MFA} <- DbgEvents, P =:= Worker]),
    ?assertEqual([{call, {?MODULE, double, [I]}} || I <- lists:seq(1, N)],
                 [{call, MFA} || {trace_ts, P, call, MFA, _} <- CallEvents, P =:= Worker]),
    Strip = fun(Es) -> [{Tag, M} || E <- Es, {Tag, M} <- [msg(E)]] end,
    Expected = lists:append([[{'receive', {work, Self, I}}, {send, {done, 2 * I}}]
                             || I <- lists:seq(1, N)]),
    ?assertEqual(Expected, Strip(MsgEvents)),
    ?assertEqual(Expected, Strip([E || E <- DbgEvents, element(3, E) =/= call])),
    assert_clean(Config, {?MODULE, double, 1}).

msg({trace, _, 'receive', M}) -> {'receive', M};
msg({trace, _, send, M, _}) -> {send, M};
msg({trace_ts, _, 'receive', M, _}) -> {'receive', M};
msg({trace_ts, _, send, M, _, _}) -> {send, M};
msg(_) -> none.

%%% Hostile input -------------------------------------------------------------

%% A node of its own with tracekit and this suite, for what would take
%% the node down if it went wrong.
start_peer() ->
    Dirs = lists:usort([filename:dirname(code:which(M)) || M <- [tracekit, ?MODULE]]),
    {ok, Peer, _} = peer:start(#{connection => standard_io,
                                 args => lists:append([["-pa", D] || D <- Dirs])}),
    Peer.

%% Match specs whose actions change trace flags are checked without
%% erlang:match_spec_test/3 running them (it crashes the VM on them), and
%% trace as they say: the call turns on tracing of the caller's sends.
match_spec_flag_actions(_Config) ->
    Peer = start_peer(),
    try
        ?assertMatch({error, {bad_spec, _, "the match spec is not valid: in {trace,[],[nonsense]}: "
                              "nonsense is not a trace flag" ++ _}},
                     peer:call(Peer, tracekit, calls,
                               [{lists, seq, 2, [{'_', [], [{trace, [], [nonsense]}]}]}])),
        {Started, W, To, Events} = peer:call(Peer, ?MODULE, flag_action_traces, []),
        ct:log("~p", [Events]),
        ?assertMatch({ok, _}, Started),
        ?assertMatch([{trace_ts, W, call, {?MODULE, double, [1]}, _},
                      {trace_ts, W, send, {done, 2}, To, _}], Events),
        ?assertEqual(42, peer:call(Peer, erlang, abs, [-42]))
    after
        peer:stop(Peer)
    end.

%% On the peer: traces calls of double/1 with a match spec that turns on
%% send tracing of the caller; a worker calls double(1) and sends the
%% result back.
flag_action_traces() ->
    Started = tracekit:calls({lists, seq, 2, [{'_', [], [{trace, [], [call]}]}]},
                             #{print => false}),
    {ok, _} = tracekit:stop(element(2, Started)),
    {ok, T} = tracekit:calls({?MODULE, double, 1, [{'_', [], [{enable_trace, send}]}]},
                             #{print => false}),
    Self = self(),
    W = spawn(fun() -> receive go -> Self ! {done, double(1)} end end),
    W ! go,
    receive {done, 2} -> ok end,
    {ok, #{events := Events}} = tracekit:stop(T),
    {Started, W, Self, [E || E <- Events, element(2, E) =:= W]}.

%% stop/1 and wait/1,2 send nothing to a process that is not a trace and
%% answer at once; stopping init used to take the node down.
stop_and_wait_only_traces(_Config) ->
    Peer = start_peer(),
    try
        Init = peer:call(Peer, erlang, whereis, [init]),
        ?assertEqual({error, not_a_trace}, peer:call(Peer, tracekit, stop, [Init])),
        timer:sleep(200),
        ?assertEqual(42, peer:call(Peer, erlang, abs, [-42]))
    after
        peer:stop(Peer)
    end,
    Other = spawn_link(fun() -> receive never -> ok end end),
    Dead = spawn(fun() -> ok end),
    tk_collector:wait_dead([Dead]),
    Remote = binary_to_term(<<131, 88, 119, 9, "other@foo", 0:32, 5:32, 0:32, 1:32>>),
    Calls = [{stop, [Other]}, {wait, [Other]}, {wait, [Other, 100]}, {stop, [self()]},
             {stop, [Dead]}, {wait, [Dead, infinity]}, {stop, [Remote]}, {wait, [Remote]},
             {stop, [x]}, {wait, [[Other]]}],
    Answers = [in_time(fun() -> apply(tracekit, F, Args) end) || {F, Args} <- Calls],
    ?assertEqual([{error, not_a_trace}, {error, not_a_trace}, {error, not_a_trace},
                  {error, not_a_trace}, {error, not_running}, {error, not_running},
                  {error, not_a_trace}, {error, not_a_trace}, {error, not_a_trace},
                  {error, not_a_trace}], Answers),
    ?assertEqual({messages, []}, erlang:process_info(Other, messages)),
    ?assertError(badarg, tracekit:wait(Other, -1)),
    ?assertError(badarg, tracekit:wait(Other, forever)),
    %% A trace can still be waited for, and stopped.
    {ok, T} = tracekit:calls("tracekit_SUITE:tick/1", #{print => false}),
    ?assertEqual({error, timeout}, tracekit:wait(T, 10)),
    ?assertMatch({ok, #{reason := stopped}}, tracekit:stop(T)),
    ?assertEqual({error, not_running}, tracekit:stop(T)),
    unlink(Other),
    exit(Other, kill).

%% Messages of a stranger to a trace's process, shaped as a stop or a
%% wait but naming no process, neither end the trace nor make it crash
%% (a `{stop, 1}' ended it, and its summary, sent to 1, crashed it before
%% the callers waiting were answered); the trace is still stopped by
%% tracekit:stop/1, with its summary.
strangers_messages_to_the_trace(Config) ->
    {ok, T} = tracekit:calls("tracekit_SUITE:tick/1", opts(Config, #{max_time => infinity})),
    M = monitor(process, T),
    [T ! J || J <- [{stop, 1}, {wait, foo}, {stop, make_ref()}, {wait, {self()}},
                    {stop, [self()]}, {wait, "x"}]],
    ticks(2),
    receive {'DOWN', M, process, T, Why} -> ct:fail({trace_ended, Why})
    after 500 -> ok
    end,
    ?assertMatch({ok, #{reason := stopped, shown := 2}}, tracekit:stop(T)),
    receive {'DOWN', M, process, T, normal} -> ok
    after 5000 -> ct:fail(trace_still_running)
    end,
    assert_clean(Config, {?MODULE, tick, 1}).

%% Messages of a stranger to every process of a trace (its agent and the
%% agent's janitor among them), shaped as the janitor's requests: the
%% janitor is told what to undo by its agent only (a stranger's undo was
%% done at the agent's end: a directory deleted; one naming no process
%% crashed the janitor and the agent then waited for it forever), and the
%% trace still stops, leaving nothing behind.
strangers_messages_to_the_agent(Config) ->
    Victim = filename:join(?config(priv_dir, Config), "victim_dir"),
    ok = file:make_dir(Victim),
    {ok, T} = tracekit:calls("tracekit_SUITE:tick/1", opts(Config, #{max_time => infinity})),
    Own = tracekit_own:processes() -- [self()],
    ?assert(length(Own) >= 3),
    Junk = [{undo, dir, {delete_dir, Victim}}, {undo, seq, bogus}, {undo, x, bogus},
            {undo_now, seq, 1}, {undo_now, dir, self()}, {undo_now, x, foo}],
    [[P ! J || J <- Junk] || P <- Own],
    [P ! {J, seq} || P <- Own, J <- Own],
    [P ! {J, dir} || P <- Own, J <- Own],
    ticks(2),
    Self = self(),
    Stopper = spawn(fun() -> Self ! {self(), tracekit:stop(T)} end),
    receive
        {Stopper, Stopped} -> ?assertMatch({ok, #{reason := stopped, shown := 2}}, Stopped)
    after 10000 -> ct:fail(stop_blocked)
    end,
    tk_collector:eventually(fun() -> not lists:any(fun is_process_alive/1, Own) end),
    ?assert(filelib:is_dir(Victim)),
    assert_clean(Config, {?MODULE, tick, 1}).

%% The answer of Fun, which must come within a second.
in_time(Fun) ->
    Self = self(),
    {P, M} = spawn_monitor(fun() -> Self ! {self(), Fun()} end),
    receive
        {P, Answer} -> demonitor(M, [flush]), Answer;
        {'DOWN', M, process, P, Why} -> {crashed, Why}
    after 1000 ->
            exit(P, kill),
            blocked
    end.

%% With a payload limit the ring cuts arguments (all of them to '...',
%% or a list ending in '...'): the printer shows them, and the trace and
%% its summary are not lost.
cut_arguments_are_printed(Config) ->
    Long = lists:seq(1, 1000),
    Self = pid_to_list(self()),
    [begin
         Io = tk_capture:start(),
         {ok, T} = tracekit:calls("tracekit_SUITE:handle/2 -> return",
                                  #{io => Io, payload => {max_bytes, N}}),
         handle(Long, Long),
         {ok, #{shown := 2}} = tracekit:stop(T),
         Lines = tk_capture:lines(Io),
         ct:log("max_bytes ~w:~n~ts", [N, lists:join("\n", Lines)]),
         [_Header, Call, Return, Summary] = Lines,
         Prefix = Self ++ " tracekit_SUITE:handle(",
         ?assertEqual(Prefix, lists:sublist(lists:nthtail(16, Call), length(Prefix))),
         ?assertEqual(")", lists:nthtail(length(Call) - 1, Call)),
         ?assert(contains(Call, "...")),
         ?assert(contains(Return, " tracekit_SUITE:handle/2 -> ")),
         ?assertEqual("tracekit: 2 events shown, 0 dropped; stopped by tracekit:stop", Summary),
         tk_capture:stop(Io)
     end || N <- [8, 16, 24, 64]],
    %% Spawn arguments too.
    Io = ?config(io, Config),
    {ok, T} = tracekit:procs(self(), #{io => Io, payload => {max_bytes, 16}}),
    Child = spawn(?MODULE, handle, [Long, Long]),
    tk_collector:wait_dead([Child]),
    {ok, #{shown := Shown}} = tracekit:stop(T),
    Lines = tk_capture:lines(Io),
    ct:log("~ts", [lists:join("\n", Lines)]),
    ?assert(Shown >= 1),
    ?assertMatch([_], [L || L <- Lines, contains(L, " spawned " ++ pid_to_list(Child)
                                                    ++ " as tracekit_SUITE:handle(")]),
    ?assertMatch({match, _}, re:run(lists:last(Lines), "^tracekit: [0-9]+ events? shown")).

%% Tracing every process leaves out what printing a line goes through:
%% the printer, the io device and the group leaders it hands output to,
%% the terminal's processes and the VM's dirty signal handlers.
%% (tracekit_shell_SUITE checks a real terminal.)
printing_path_is_not_traced(_Config) ->
    Io = tk_capture:start(),
    Relay = tk_capture:start(),
    true = group_leader(Relay, Io),
    Terminal = [P || N <- [user_drv, user_drv_writer, user_drv_reader, user,
                           standard_error, standard_error_writer],
                     P <- [whereis(N)], is_pid(P)],
    %% The VM's dirty process signal handlers (their messages say which
    %% process to handle; the terminal's writer makes them busy).
    Handlers = [P || P <- processes(),
                     erlang:process_info(P, initial_call)
                         =:= {initial_call, {erts_dirty_process_signal_handler, start, 0}}],
    ?assertMatch([_ | _], Handlers),
    {ok, T} = tracekit:messages(all, #{io => Io, max_time => infinity}),
    [Session] = tracekit_sessions(),
    Flags = fun(P) -> trace:info(Session, P, flags) end,
    Untraced = [T, Io, Relay | Terminal ++ Handlers],
    ?assert(length(Untraced) >= 6),
    ?assertEqual([{flags, []} || _ <- Untraced], [Flags(P) || P <- Untraced]),
    ?assertMatch({flags, [_ | _]}, Flags(self())),
    ?assertMatch({flags, [_ | _]}, Flags(whereis(init))),
    {ok, _} = tracekit:stop(T),
    [tk_capture:stop(P) || P <- [Io, Relay]].

bad_input_gives_clear_errors(Config) ->
    Io = ?config(io, Config),
    Self = self(),
    Sessions = trace:session_info(all),
    Dead = spawn(fun() -> ok end),
    tk_collector:wait_dead([Dead]),
    Bad = [tracekit:messages([self() | foo], opts(Config, #{})),
           tracekit:procs([foo | self()], opts(Config, #{})),
           tracekit:calls("tracekit_SUITE:double/1", opts(Config, #{processes => [self() | x]})),
           tracekit:calls(<<255, 0>>, opts(Config, #{})),
           tracekit:calls("tracekit_SUITE:double/1", #{io => self()}),
           tracekit:calls("tracekit_SUITE:double/1", #{io => no_such_name_tk}),
           tracekit:calls("tracekit_SUITE:double/1", #{io => Dead}),
           tracekit:calls("tracekit_SUITE:double/1", #{io => "x"})],
    ct:log("~p", [Bad]),
    ?assertMatch([{error, {bad_process, [Self | foo], "expected a proper list of pids and "
                           "registered names"}},
                  {error, {bad_process, foo, "no process is registered as foo"}},
                  {error, {bad_process, [Self | x], _}},
                  {error, {bad_spec, <<255, 0>>, "the binary is not UTF-8 text: byte 1 " ++ _}},
                  {error, {bad_option, {io, Self}, "io: the calling process is not an io device"}},
                  {error, {bad_option, {io, no_such_name_tk},
                           "io: no process is registered as no_such_name_tk"}},
                  {error, {bad_option, {io, Dead}, "io: the process is not alive"}},
                  {error, {bad_option, {io, "x"}, _}}], Bad),
    ?assertEqual(Sessions, trace:session_info(all)),
    ?assertEqual("", tk_capture:text(Io)).

%% A process that does not answer io requests cannot hold the trace (or
%% its caller) for ever.
io_device_that_does_not_answer(Config) ->
    Mute = spawn_link(fun() -> receive never -> ok end end),
    T0 = erlang:monotonic_time(millisecond),
    R = tracekit:calls("tracekit_SUITE:double/1", #{io => Mute}),
    Ms = erlang:monotonic_time(millisecond) - T0,
    ct:log("~p after ~w ms", [R, Ms]),
    ?assertMatch({error, {bad_option, {io, Mute}, "io: " ++ _}}, R),
    {error, {_, _, Why}} = R,
    ?assert(contains(Why, "did not print within 5000 ms; is it an io device?")),
    ?assert(Ms >= 5000 andalso Ms < 8000),
    assert_clean(Config, {?MODULE, double, 1}),
    unlink(Mute),
    exit(Mute, kill).

%% A format fun that fails, or returns what is not text, costs its line,
%% not the trace.
failing_format_fun(Config) ->
    Io = ?config(io, Config),
    Fun = fun({trace_ts, _, call, {_, _, [1]}, _}) -> error(boom);
             ({trace_ts, _, call, {_, _, [2]}, _}) -> {not_text};
             ({trace_ts, _, call, {_, _, [X]}, _}) -> io_lib:format("double of ~w", [X])
          end,
    {ok, T} = tracekit:calls("tracekit_SUITE:double/1", opts(Config, #{format => Fun})),
    [double(I) || I <- [1, 2, 3]],
    ?assertMatch({ok, #{shown := 3}}, tracekit:stop(T)),
    Lines = tk_capture:lines(Io),
    ct:log("~ts", [lists:join("\n", Lines)]),
    ?assertMatch([_, "tracekit: cannot format the event {trace_ts," ++ _,
                  "tracekit: cannot format the event {trace_ts," ++ _,
                  "double of 3",
                  "tracekit: 3 events shown, 0 dropped; stopped by tracekit:stop"], Lines),
    ?assert(contains(lists:nth(2, Lines), "error:boom")),
    ?assert(contains(lists:nth(3, Lines), "it returned {not_text}, which is not text")).

%% A format fun that never returns ends the trace (with a line that says
%% so) 5 seconds later: the limits, stop and cleanup still work.
format_fun_that_hangs(Config) ->
    Io = ?config(io, Config),
    Fun = fun(_) -> receive after infinity -> ok end end,
    {ok, T} = tracekit:calls("tracekit_SUITE:double/1",
                             opts(Config, #{format => Fun, max_time => 1000})),
    double(1),
    ?assertMatch({ok, #{reason := {format_timeout, 5000}, shown := 1}}, tracekit:wait(T, 10000)),
    Lines = tk_capture:lines(Io),
    ct:log("~ts", [lists:join("\n", Lines)]),
    ?assertMatch([_, "tracekit: the format fun did not return a line within 5000 ms",
                  "tracekit: 1 event shown, 0 dropped; stopped: the format fun did not "
                  "return a line within 5000 ms"], Lines),
    assert_clean(Config, {?MODULE, double, 1}).

%% Lines that take long to make do not hold the trace past max_time.
slow_format_fun_and_max_time(Config) ->
    Fun = fun(_) -> timer:sleep(200), "slow" end,
    {ok, T} = tracekit:calls("tracekit_SUITE:double/1",
                             opts(Config, #{format => Fun, max_time => 300})),
    T0 = erlang:monotonic_time(millisecond),
    [double(I) || I <- lists:seq(1, 20)],
    {ok, #{reason := Reason, shown := Shown}} = tracekit:wait(T, 10000),
    Ms = erlang:monotonic_time(millisecond) - T0,
    ct:log("~p, ~p shown in ~p ms", [Reason, Shown, Ms]),
    ?assertEqual({max_time, 300}, Reason),
    ?assert(Shown < 5),
    ?assert(Ms < 2000),
    assert_clean(Config, {?MODULE, double, 1}).

%% Lines that take long to make (no time limit): tracekit:stop/1 ends
%% the trace after the line being made, not after the whole batch.
stop_while_lines_are_slow(Config) ->
    Fun = fun(_) -> timer:sleep(300), "slow" end,
    {ok, T} = tracekit:calls("tracekit_SUITE:double/1",
                             opts(Config, #{format => Fun, max_time => infinity,
                                            max_events => infinity})),
    [double(I) || I <- lists:seq(1, 30)],
    timer:sleep(500),
    {Us, {ok, #{reason := stopped, shown := Shown}}} = timer:tc(fun() -> tracekit:stop(T) end),
    ct:log("stopped in ~p ms, ~p shown", [Us div 1000, Shown]),
    ?assert(Us < 2000000),
    ?assert(Shown < 10),
    assert_clean(Config, {?MODULE, double, 1}).

%% The process that runs the format fun is not traced: tracing every
%% process's messages does not feed on the lines.
format_fun_is_not_traced(Config) ->
    Fun = fun(E) -> io_lib:format("~0P", [E, 5]) end,
    {ok, T} = tracekit:messages(all, opts(Config, #{format => Fun, max_time => 500,
                                                    max_events => infinity})),
    {ok, #{shown := Shown}} = tracekit:wait(T, 5000),
    ct:log("~p events", [Shown]),
    ?assert(Shown < 50).

%% Two traces of every process's messages at once: the second leaves the
%% first's processes untraced, so their lines do not feed each other
%% (each line of one an event of the other, without end).
two_traces_of_all_messages(Config) ->
    Opts = opts(Config, #{max_time => 1000, max_events => infinity}),
    {ok, T1} = tracekit:messages(all, Opts#{format => fun(E) -> io_lib:format("~0P", [E, 5]) end}),
    {ok, T2} = tracekit:messages(all, Opts),
    {ok, #{shown := Shown1}} = tracekit:wait(T1, 5000),
    Shown2 = case tracekit:wait(T2, 5000) of
                 {ok, #{shown := S2}} -> S2;
                 {error, not_running} -> 0   % ended while waiting for T1
             end,
    ct:log("~p and ~p events", [Shown1, Shown2]),
    ?assert(Shown1 < 200),
    assert_clean(Config, {?MODULE, double, 1}).

%%% To a file ----------------------------------------------------------------

%% The same trace printed and written: the file holds exactly the events
%% the printed trace showed (one line each), up to the same limit, and the
%% summary line says where the file is and how many events it holds.
file_holds_what_print_shows(Config) ->
    Io = ?config(io, Config),
    File = ?config(file, Config),
    Run = fun(Opts) ->
                  {ok, T} = tracekit:calls("tracekit_SUITE:double/1 -> return",
                                           opts(Config, Opts#{max_events => 7})),
                  [double(I) || I <- lists:seq(1, 10)],
                  tracekit:wait(T, 5000)
          end,
    {ok, #{reason := {max_events, 7}, shown := 7, events := Collected}} =
        Run(#{print => false}),
    ?assertEqual(7, length(Collected)),
    {ok, Summary} = Run(#{file => File}),
    ct:log("~p", [Summary]),
    ?assertMatch(#{reason := {max_events, 7}, shown := 7, file := File}, Summary),
    ?assertEqual(false, maps:is_key(events, Summary)),
    {ok, Read} = tracekit_file:read(File),
    ?assertEqual([untimed(E) || E <- Collected], [untimed(E) || E <- Read]),
    [Header, Line] = tk_capture:lines(Io),
    ?assertEqual("tracekit: tracing calls to tracekit_SUITE:double/1 -> return in all "
                 "processes into " ++ File ++ " (stops after 7 events or 15000 ms)", Header),
    {match, [Written, Dropped]} =
        re:run(Line, "^tracekit: ([0-9]+) events written to (?:.*), ([0-9]+) dropped; "
               "stopped at the limit of 7 events$", [{capture, all_but_first, list}]),
    ?assertEqual("7", Written),
    %% 20 events in all, 7 in the file: the others are counted.
    ?assert(list_to_integer(Dropped) =< 13),
    ?assert(contains(Line, " written to " ++ File ++ ",")),
    assert_clean(Config, {?MODULE, double, 1}).

untimed(E) -> erlang:delete_element(tuple_size(E), E).

%% The rate and time limits end a file as they end a printed trace: the
%% file holds the events before the limit, and no more.
file_limits(Config) ->
    File = ?config(file, Config),
    {ok, T} = tracekit:calls("tracekit_SUITE:tick/1",
                             opts(Config, #{rate => {10, 1000}, print => false,
                                            file => File})),
    ticks(50),
    {ok, #{reason := {rate, {10, 1000}}, shown := 10, dropped := D}} = tracekit:wait(T, 5000),
    ?assert(D >= 1 andalso D =< 40),
    {ok, Ten} = tracekit_file:read(File),
    Self = self(),
    ?assertEqual([{trace_ts, Self, call, {?MODULE, tick, [I]}} || I <- lists:seq(1, 10)],
                 [untimed(E) || E <- Ten]),
    T0 = erlang:monotonic_time(millisecond),
    {ok, T2} = tracekit:calls("tracekit_SUITE:tick/1",
                              opts(Config, #{max_time => 300, print => false, file => File})),
    ticks(3),
    {ok, #{reason := {max_time, 300}, shown := 3, dropped := 0}} = tracekit:wait(T2, 5000),
    ?assert(erlang:monotonic_time(millisecond) - T0 >= 300),
    {ok, Three} = tracekit_file:read(File),
    ?assertEqual(3, length(Three)),
    assert_clean(Config, {?MODULE, tick, 1}).

%% Written and dropped add up to every call, with a buffer too small for
%% a burst of four processes; the file holds exactly what it says.
file_drop_accounting(Config) ->
    File = ?config(file, Config),
    N = 200000,
    {ok, T} = tracekit:calls("tracekit_SUITE:tick/1",
                             opts(Config, #{max_events => infinity, max_time => infinity,
                                            ring_size => 4096, file => File})),
    Self = self(),
    Burst = [spawn_link(fun() -> ticks(N div 4), Self ! {done, self()} end)
             || _ <- lists:seq(1, 4)],
    [receive {done, P} -> ok end || P <- Burst],
    {ok, #{reason := stopped, shown := Written, dropped := Dropped}} = tracekit:stop(T),
    ct:log("written ~w, dropped ~w", [Written, Dropped]),
    ?assertEqual(N, Written + Dropped),
    {ok, Count} = tracekit_file:fold(fun(_, C) -> C + 1 end, 0, File),
    ?assertEqual(Written, Count).

file_bad_paths(Config) ->
    Missing = filename:join([?config(priv_dir, Config), "no_such_dir", "x.tkt"]),
    ?assertMatch({error, {bad_option, {file, Missing}, "file: cannot create " ++ _}},
                 tracekit:calls("tracekit_SUITE:tick/1", #{file => Missing})),
    {error, {bad_option, _, Why}} = tracekit:calls("tracekit_SUITE:tick/1", #{file => Missing}),
    ?assert(contains(Why, "enoent")),
    [?assertMatch({error, {bad_option, {file, Bad}, "file is the path" ++ _}},
                  tracekit:calls("tracekit_SUITE:tick/1", #{file => Bad}))
     || Bad <- [42, <<>>, "", [$a, {x}], {x}, [16#110000]]],
    ?assertMatch({error, {bad_option, {rate, {2000000, 10}}, _}},
                 tracekit:calls("tracekit_SUITE:tick/1",
                                #{file => ?config(file, Config), rate => {2000000, 10}})),
    ?assertEqual([], tracekit_sessions()),
    ?assertEqual({error, enoent}, file:read_file_info(Missing)).

%%% Callers, stacks, records, references, colours ----------------------------

%% The lines of a trace after its header, without their times, up to the
%% summary (the times are checked by calls_print_one_line_each).
body_lines(Io) ->
    [_Header | Lines] = tk_capture:lines(Io),
    [case re:run(L, "^[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} ") of
         {match, _} -> lists:nthtail(16, L);
         nomatch -> L
     end || L <- Lines].

caller_and_stack(Config) ->
    Io = ?config(io, Config),
    Self = pid_to_list(self()),
    {ok, T} = tracekit:calls(["tracekit_SUITE:middle/1 -> caller",
                              "tracekit_SUITE:double/1 -> return, stack"],
                             opts(Config, #{stack_depth => 2})),
    [[4]] = outer(2),
    {ok, #{shown := 3}} = tracekit:stop(T),
    Lines = body_lines(Io),
    ct:log("~ts", [lists:join("\n", Lines)]),
    ?assertEqual([Self ++ " tracekit_SUITE:middle(2) <- tracekit_SUITE:outer/1",
                  Self ++ " tracekit_SUITE:double(2) <- tracekit_SUITE:middle/1 "
                  "<- tracekit_SUITE:outer/1 <- ...",
                  Self ++ " tracekit_SUITE:double/1 -> 4",
                  "tracekit: 3 events shown, 0 dropped; stopped by tracekit:stop"], Lines),
    %% Deep enough for the whole stack: it ends where the process began.
    Io2 = tk_capture:start(),
    {ok, T2} = tracekit:calls("tracekit_SUITE:double/1 -> stack",
                              #{io => Io2, stack_depth => 64}),
    Self2 = self(),
    P = spawn(fun() -> Self2 ! {self(), outer(3)} end),
    receive {P, [[6]]} -> ok end,
    {ok, #{shown := 1}} = tracekit:stop(T2),
    [Line, _] = body_lines(Io2),
    ct:log("~ts", [Line]),
    %% (The fun is a function of the module, of the variables it uses.)
    ?assertMatch({match, _},
                 re:run(Line, "^" ++ pid_to_list(P) ++ " tracekit_SUITE:double\\(3\\) <- "
                        "tracekit_SUITE:middle/1 <- tracekit_SUITE:outer/1 <- "
                        "tracekit_SUITE:'-caller_and_stack/1-fun-[0-9]+-'/1$")),
    tk_capture:stop(Io2),
    %% Collected, the events carry what the VM gave.
    {ok, T3} = tracekit:calls("tracekit_SUITE:middle/1 -> caller", #{print => false}),
    outer(1),
    {ok, #{events := [{trace_ts, _, call, {?MODULE, middle, [1]}, {caller, {?MODULE, outer, 1}}, _}]}}
        = tracekit:stop(T3).

records_of_the_modules_traced(Config) ->
    Io = ?config(io, Config),
    Self = pid_to_list(self()),
    {ok, T} = tracekit:calls("tracekit_SUITE:handle/2 -> return", opts(Config, #{})),
    handle(#tk_state{count = 3, name = x}, {tk_state, 1, 2, 3}),
    {ok, _} = tracekit:stop(T),
    ?assertEqual([Self ++ " tracekit_SUITE:handle(#tk_state{count = 3,name = x}, {tk_state,1,2,3})",
                  Self ++ " tracekit_SUITE:handle/2 -> {reply,#tk_state{count = 3,name = x},"
                  "{tk_state,1,2,3}}",
                  "tracekit: 2 events shown, 0 dropped; stopped by tracekit:stop"],
                 body_lines(Io)),
    %% Off, and records of other modules.
    [begin
         Io2 = tk_capture:start(),
         {ok, T2} = tracekit:calls("tracekit_SUITE:handle/2", #{io => Io2, records => R}),
         handle(#tk_state{count = 3, name = x}, {file_info, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}),
         {ok, _} = tracekit:stop(T2),
         [Line, _] = body_lines(Io2),
         ?assertEqual(Self ++ " tracekit_SUITE:handle(" ++ Expected ++ ")", Line),
         tk_capture:stop(Io2)
     end || {R, Expected} <- [{false, "{tk_state,3,x}, {file_info,1,2,3,4,5,6,7,8,9,10,11,12,13}"},
                              {[file], "#tk_state{count = 3,name = x}, #file_info{size = 1,type = 2,"
                                       "access = 3,atime = 4,mtime = 5,ctime = 6,mode = 7,links = 8,"
                                       "major_device = 9,minor_device = 10,inode = 11,uid = 12,gid = 13}"}]].

%% A module compiled without debug info: its tuples print as tuples, and
%% the trace goes on.
records_of_a_module_without_debug_info(Config) ->
    Io = ?config(io, Config),
    Dir = ?config(priv_dir, Config),
    Src = filename:join(Dir, "tk_no_dbg.erl"),
    ok = file:write_file(Src, "-module(tk_no_dbg).\n-export([f/1]).\n"
                         "-record(r, {a, b}).\nf(X) -> #r{a = X}.\n"),
    {ok, tk_no_dbg} = compile:file(Src, [{outdir, Dir}]),
    {module, tk_no_dbg} = code:load_abs(filename:join(Dir, "tk_no_dbg")),
    {ok, T} = tracekit:calls("tk_no_dbg:f/1 -> return", opts(Config, #{})),
    tk_no_dbg:f(1),
    {ok, #{shown := 2}} = tracekit:stop(T),
    Self = pid_to_list(self()),
    ?assertEqual([Self ++ " tk_no_dbg:f(1)", Self ++ " tk_no_dbg:f/1 -> {r,1,undefined}",
                  "tracekit: 2 events shown, 0 dropped; stopped by tracekit:stop"],
                 body_lines(Io)),
    code:purge(tk_no_dbg), code:delete(tk_no_dbg).

%% The messages of a gen_server: its state record, from the module it
%% was started in; the alias references of calls as short tags, the
%% same in the request and in the reply.
records_of_a_server(Config) ->
    Io = ?config(io, Config),
    {ok, S} = gen_server:start(?MODULE, tk_name, []),
    {ok, _} = tracekit:messages(S, opts(Config, #{max_events => 4})),
    3 = gen_server:call(S, {add, 3}),
    #tk_state{count = 3} = gen_server:call(S, get),
    tk_capture:wait_for(Io, "^tracekit: 4 events", 5000),
    Lines = body_lines(Io),
    ct:log("~ts", [lists:join("\n", Lines)]),
    Me = pid_to_list(self()),
    SP = pid_to_list(S),
    {match, [Tag1]} = re:run(hd(Lines), "alias\\|(#Ref<\\.\\.[0-9]+>)", [{capture, all_but_first, list}]),
    {match, [Tag2]} = re:run(lists:nth(3, Lines), "alias\\|(#Ref<\\.\\.[0-9]+>)",
                             [{capture, all_but_first, list}]),
    ?assertNotEqual(Tag1, Tag2),
    ?assertEqual([SP ++ " << {'$gen_call',{" ++ Me ++ ",[alias|" ++ Tag1 ++ "]},{add,3}}",
                  SP ++ " ! {[alias|" ++ Tag1 ++ "],3} -> alias " ++ Tag1,
                  SP ++ " << {'$gen_call',{" ++ Me ++ ",[alias|" ++ Tag2 ++ "]},get}",
                  SP ++ " ! {[alias|" ++ Tag2 ++ "],#tk_state{count = 3,name = tk_name}} -> alias "
                  ++ Tag2], lists:sublist(Lines, 4)),
    gen_server:stop(S).

%% Collected events keep references whole; printed ones show tags, or
%% the whole reference with short_refs => false.
short_refs_in_calls(Config) ->
    Ref = make_ref(),
    Full = ref_to_list(Ref),
    {ok, T} = tracekit:calls("tracekit_SUITE:handle/2", #{print => false}),
    handle(Ref, Ref),
    {ok, #{events := [{trace_ts, _, call, {?MODULE, handle, [Ref, Ref]}, _}]}} = tracekit:stop(T),
    Short = "#Ref<.." ++ lists:last(string:lexemes(Full, ".>")) ++ ">",
    [begin
         Io = tk_capture:start(),
         {ok, T2} = tracekit:calls("tracekit_SUITE:handle/2", Opts#{io => Io}),
         handle(Ref, [Ref]),
         {ok, _} = tracekit:stop(T2),
         [Line, _] = body_lines(Io),
         ?assertEqual(pid_to_list(self()) ++ " tracekit_SUITE:handle(" ++ Shown ++ ", [" ++ Shown ++ "])",
                      Line),
         tk_capture:stop(Io)
     end || {Opts, Shown} <- [{#{}, Short}, {#{short_refs => false}, Full}]],
    ?assertNotEqual(Short, Full),
    Config.

%% Colours only when asked for (tk_capture is not a terminal; the shell
%% suite checks a real one).
colour_when_asked(Config) ->
    Io = ?config(io, Config),
    {ok, T} = tracekit:calls("tracekit_SUITE:double/1 -> return", opts(Config, #{colour => true})),
    double(1),
    {ok, _} = tracekit:stop(T),
    Self = pid_to_list(self()),
    ?assertEqual(["\e[36m" ++ Self ++ "\e[0m \e[1mtracekit_SUITE:double\e[0m(1)",
                  "\e[36m" ++ Self ++ "\e[0m \e[32mtracekit_SUITE:double/1 ->\e[0m 2",
                  "tracekit: 2 events shown, 0 dropped; stopped by tracekit:stop"],
                 body_lines(Io)),
    [begin
         Io2 = tk_capture:start(),
         {ok, T2} = tracekit:calls("tracekit_SUITE:double/1", #{io => Io2, colour => C}),
         double(1),
         {ok, _} = tracekit:stop(T2),
         ?assertEqual([Self ++ " tracekit_SUITE:double(1)",
                       "tracekit: 1 event shown, 0 dropped; stopped by tracekit:stop"], body_lines(Io2)),
         tk_capture:stop(Io2)
     end || C <- [auto, false]].

new_options_are_checked(Config) ->
    Bad = [{stack_depth, 0}, {stack_depth, 65}, {stack_depth, x}, {records, []},
           {records, [x | y]}, {records, "m"}, {short_refs, 1}, {colour, yes}],
    [?assertMatch({error, {bad_option, {K, V}, _}},
                  tracekit:calls("tracekit_SUITE:double/1", opts(Config, #{K => V})))
     || {K, V} <- Bad],
    ?assertMatch({error, {bad_spec, _, "unknown action stak after ->" ++ _}},
                 tracekit:calls("tracekit_SUITE:double/1 -> stak", opts(Config, #{}))),
    ?assertEqual([], tracekit_sessions()),
    ?assertEqual("", tk_capture:text(?config(io, Config))).

%% records => a long list of modules (that do not exist): the trace
%% starts at once (no more modules are looked for than are read).
many_record_modules(Config) ->
    Mods = [list_to_atom("tracekit_no_such_module_" ++ integer_to_list(I))
            || I <- lists:seq(1, 30000)],
    %% Judged by the node's reductions, which do not move with the
    %% machine's load, against a trace that names only the 200 modules
    %% read: looking for a missing module costs what the code path's
    %% length makes it (1,000 to 16,000 reductions here), so reading every
    %% module named would cost a hundred times more than the other 29,800
    %% names do.
    Cost = fun(Records) ->
                   {R0, _} = statistics(exact_reductions),
                   {Us, {ok, T}} = timer:tc(fun() ->
                                                    tracekit:calls("tracekit_SUITE:double/1",
                                                                   opts(Config, #{records => Records}))
                                            end),
                   {R1, _} = statistics(exact_reductions),
                   {ok, _} = tracekit:stop(T),
                   ct:log("~p modules: started in ~p ms, ~p reductions",
                          [length(Records), Us div 1000, R1 - R0]),
                   R1 - R0
           end,
    Read = Cost(lists:sublist(lists:usort(Mods), 200)),
    All = Cost(Mods ++ Mods),
    ?assert(All - Read < 1000000).

%% Maps in argument patterns and guards select calls on the VM.
maps_in_patterns_select(Config) ->
    Calls = [{#{op => get, k => 1}, a}, {#{op => put}, b}, {#{n => 5}, 4}, {#{n => 5}, 6},
             {#{x => 1}, x}, {#{x => 1, y => 2}, x}, {not_a_map, n}],
    Selected = fun(Spec) ->
                       {ok, T} = tracekit:calls(Spec, opts(Config, #{print => false})),
                       [handle(A, B) || {A, B} <- Calls],
                       {ok, #{events := Events}} = tracekit:stop(T),
                       [list_to_tuple(Args) || {trace_ts, _, call, {?MODULE, handle, Args}, _} <- Events]
               end,
    ?assertEqual([{#{op => get, k => 1}, a}], Selected("tracekit_SUITE:handle(#{op := get}, _)")),
    ?assertEqual([{#{n => 5}, 4}], Selected("tracekit_SUITE:handle(M, S) when map_get(n, M) > S")),
    ?assertEqual([{#{x => 1}, x}],
                 Selected("tracekit_SUITE:handle(M, K) when is_map_key(K, M), M =:= #{K => 1}")),
    ?assertEqual([{#{x => 1}, x}, {#{x => 1, y => 2}, x}],
                 Selected("tracekit_SUITE:handle(#{x := 1}, _)")),
    ?assertEqual([{#{op => get, k => 1}, a}, {#{x => 1, y => 2}, x}],
                 Selected("tracekit_SUITE:handle(M, _) when map_size(M) =:= 2")).

%%% tracekit's own work ------------------------------------------------------

%% Every function of the modules tracekit itself uses, traced in every
%% process (printed, and collected): no event comes from tracekit's own
%% processes, nor from the caller's process, which only starts and stops
%% the trace; the calls of a process of the test's are all there.
own_work_is_not_traced(Config) ->
    Mods = [lists, maps, ets, io_lib, gen_server, erpc, timer, proplists, unicode, file],
    [own_work(Config, M, Print) || M <- Mods, Print <- [true, false]],
    ok.

own_work(Config, M, Print) ->
    Spec = atom_to_list(M) ++ ":_",
    {ok, T} = tracekit:calls(Spec, opts(Config, #{print => Print, max_events => infinity,
                                                 max_time => infinity})),
    Self = self(),
    Helper = spawn(fun() -> Self ! {own, tracekit_own:processes()} end),
    Own = receive {own, O} -> O end,
    %% (Only receive here: the calling process is traced too.)
    receive after 50 -> ok end,
    {ok, Summary} = tracekit:stop(T),
    Pids = case Summary of
               #{events := Es} -> lists:usort([element(2, E) || E <- Es]);
               #{} -> printed_pids(?config(io, Config))
           end,
    ct:log("~s (print ~p): ~p events of ~p; tracekit's: ~p",
           [Spec, Print, maps:get(shown, Summary), Pids, Own]),
    ?assertEqual([], [P || P <- Pids, lists:member(P, [T, Self | Own])]),
    %% (The process that asked for tracekit's processes was traced.)
    ?assert(M =/= ets orelse lists:member(Helper, Pids) orelse Print),
    tk_capture:clear(?config(io, Config)).

printed_pids(Io) ->
    lists:usort([list_to_pid(P) || L <- tk_capture:lines(Io),
                                   {match, [P]} <- [re:run(L, "^[0-9:.]+ (<[0-9.]+>)",
                                                           [{capture, all_but_first, list}])]]).
