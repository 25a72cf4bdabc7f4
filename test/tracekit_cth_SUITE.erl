%% tracekit_cth under a real Common Test run: the sample suite in
%% tracekit_cth_SUITE_data (passing and failing cases) runs on a peer node
%% (Common Test cannot run inside itself), then its log directory is
%% checked. The sample is kept as .erl.src so that neither rebar3 nor the
%% project's own test run takes it for one of theirs.
-module(tracekit_cth_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include_lib("xmerl/include/xmerl.hrl").

-export([all/0, init_per_suite/1, end_per_suite/1]).
-export([failing_case_leaves_its_trace/1, passing_case_leaves_nothing/1,
         config_turns_recording_off/1, always_writes_passing_cases/1,
         group_options_apply/1, link_in_case_log/1,
         hook_errors_do_not_fail_cases/1, timetrap_kill_is_recorded/1,
         skipped_case_leaves_nothing/1, nothing_left_in_the_node/1,
         options_are_checked/1, calls_with_flag_actions/1, bad_options_record_nothing/1,
         html_report_of_failing_case/1, own_work_is_not_recorded/1,
         slowest_functions_of_failing_case/1, bare_hook_records_the_case/1]).
%% Run on a peer node by the cases.
-export([run_hook/2]).

all() ->
    [failing_case_leaves_its_trace, passing_case_leaves_nothing,
     config_turns_recording_off, always_writes_passing_cases,
     group_options_apply, link_in_case_log, hook_errors_do_not_fail_cases,
     timetrap_kill_is_recorded, skipped_case_leaves_nothing,
     nothing_left_in_the_node, options_are_checked, calls_with_flag_actions,
     bad_options_record_nothing, html_report_of_failing_case, own_work_is_not_recorded,
     slowest_functions_of_failing_case, bare_hook_records_the_case].

%% One run of the sample suite for all the cases here.
init_per_suite(Config) ->
    Priv = ?config(priv_dir, Config),
    Sample = filename:join([Priv, "sample", "tracekit_cth_sample_SUITE"]),
    ok = filelib:ensure_dir(Sample),
    {ok, _} = file:copy(filename:join(?config(data_dir, Config),
                                      "tracekit_cth_sample_SUITE.erl.src"),
                        Sample ++ ".erl"),
    Bare = filename:join([Priv, "sample", "tracekit_cth_bare_SUITE"]),
    {ok, _} = file:copy(filename:join(?config(data_dir, Config),
                                      "tracekit_cth_bare_SUITE.erl.src"),
                        Bare ++ ".erl"),
    LogDir = filename:join(Priv, "cth_sample_logs"), % priv_dir is the run's
    ok = filelib:ensure_path(LogDir),
    Ebin = filename:dirname(code:which(tracekit)),
    {ok, Peer, _} = peer:start_link(#{connection => standard_io,
                                   args => ["-pa", Ebin]}),
    {Result, Left} =
        try
            R = peer:call(Peer, ct, run_test,
                          [[{suite, [Sample, Bare]}, {logdir, LogDir}, {auto_compile, true}]],
                          120000),
            %% What the hook left in the node: sessions, rings, the seq
            %% tracer.
            timer:sleep(100),
            _ = peer:call(Peer, lists, foreach,
                          [fun erlang:garbage_collect/1, peer:call(Peer, erlang, processes, [])]),
            {R, {peer:call(Peer, trace, session_info, [all]),
                 peer:call(Peer, tracekit_ring, alive, []),
                 peer:call(Peer, seq_trace, get_system_tracer, [])}}
        after
            peer:stop(Peer)
        end,
    ct:log("sample run: ~p~nleft: ~p", [Result, Left]),
    [RunDir] = filelib:wildcard(filename:join(LogDir,
                                              "ct_run.*/*tracekit_cth_sample_SUITE.logs/run.*")),
    [BareDir] = filelib:wildcard(filename:join(LogDir,
                                               "ct_run.*/*tracekit_cth_bare_SUITE.logs/run.*")),
    [{result, Result}, {left, Left}, {run_dir, RunDir}, {bare_dir, BareDir} | Config].

end_per_suite(_Config) ->
    ok.

%% Files the hook wrote for a case.
trace_files(Config, TC) ->
    filelib:wildcard(filename:join(?config(run_dir, Config),
                                   "tracekit_cth_sample_suite." ++ atom_to_list(TC)
                                   ++ ".tracekit*")).

read(Config, TC, Ext) ->
    File = filename:join(?config(run_dir, Config),
                         "tracekit_cth_sample_suite." ++ atom_to_list(TC)
                         ++ ".tracekit" ++ Ext),
    {ok, Bin} = file:read_file(File),
    unicode:characters_to_list(Bin).

contains(Text, Part) ->
    string:find(Text, Part) =/= nomatch.

failing_case_leaves_its_trace(Config) ->
    %% The sample suite: 3 passing cases, 6 failing ones, 1 skipped by its
    %% init_per_testcase; the bare suite: 1 failing case.
    ?assertMatch({3, 7, {1, 0}}, ?config(result, Config)),
    Names = [filename:basename(F) || F <- trace_files(Config, failing_case)],
    ?assertEqual(["tracekit_cth_sample_suite.failing_case.tracekit.html",
                  "tracekit_cth_sample_suite.failing_case.tracekit.messages.mmd",
                  "tracekit_cth_sample_suite.failing_case.tracekit.seq.mmd",
                  "tracekit_cth_sample_suite.failing_case.tracekit.txt"],
                 lists:sort(Names)),
    Text = read(Config, failing_case, ".txt"),
    ct:log("~ts", [Text]),
    [_Header | Lines] = string:split(Text, "\n", all),
    %% The body of the case and nothing before it: it starts with the
    %% call of the case and ends with the exception that failed it.
    ?assert(contains(hd(Lines), "(testcase) tracekit_cth_sample_SUITE:failing_case([")),
    ?assert(contains(lists:last([L || L <- Lines, L =/= ""]),
                     "(testcase) tracekit_cth_sample_SUITE:failing_case/1 raised "
                     "error:{badmatch,undefined}")),
    %% The calls of the spec with their returns, in the server.
    Calls = [L || L <- Lines, contains(L, "(sample_server) tracekit_cth_sample_SUITE:handle_call")],
    ?assertMatch([_, _, _, _], Calls),
    ?assert(contains(lists:nth(1, Calls), "handle_call({get,color}, {<")),
    ?assert(contains(lists:nth(2, Calls), "handle_call/3 -> {reply,blue,#{color => blue}}")),
    ?assert(contains(lists:nth(3, Calls), "handle_call({get,size}, {<")),
    ?assert(contains(lists:nth(4, Calls), "handle_call/3 -> {reply,undefined,#{color => blue}}")),
    %% Messages both ways, seen by process tracing and by seq_trace: one
    %% line each, with the serial (and for a receive, the sender), the
    %% alias references as short tags, the same in a call and its reply.
    ?assertEqual([], [L || L <- Lines, contains(L, "seq_trace")]),
    T = "^[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} ",
    Tc = "<[0-9.]+> \\(testcase\\)",
    Srv = "<[0-9.]+> \\(sample_server\\)",
    Ref = "\\[alias\\|(#Ref<\\.\\.[0-9]+>)\\]",
    Serial = " \\[[0-9]+,[0-9]+\\]$",
    Messages = [L || L <- Lines, contains(L, " ! ") orelse contains(L, " << ")],
    ct:log("~p", [Messages]),
    ?assertMatch([_, _, _, _, _, _, _, _], Messages),
    Tags = [begin
                {match, [Tag]} = re:run(L, Re, [{capture, all_but_first, list}]),
                Tag
            end || {L, Re} <- lists:zip(
                                Messages,
                                lists:append(
                                  [[T ++ Tc ++ " ! {'\\$gen_call',{<[0-9.]+>," ++ Ref ++ "},{get," ++ K
                                    ++ "}} -> " ++ Srv ++ Serial,
                                    T ++ Srv ++ " << {'\\$gen_call',{<[0-9.]+>," ++ Ref ++ "},{get," ++ K
                                    ++ "}} from " ++ Tc ++ Serial,
                                    T ++ Srv ++ " ! {" ++ Ref ++ "," ++ V ++ "} -> alias #Ref<\\.\\.[0-9]+>"
                                    ++ Serial,
                                    T ++ Tc ++ " << {" ++ Ref ++ "," ++ V ++ "} from " ++ Srv ++ Serial]
                                   || {K, V} <- [{"color", "blue"}, {"size", "undefined"}]]))],
    [A, A, A, A, B, B, B, B] = Tags,
    ?assertNotEqual(A, B),
    %% The diagrams: the test case and the server, four arrows.
    Expected = ["sequenceDiagram",
                "    participant p1 as #60;0.",        % <0.N.0> (testcase)
                "    participant p2 as #60;0.",        % <0.N.0> (sample_server)
                "    p1->>p2: call {get,color}",
                "    p2->>p1: reply blue",
                "    p1->>p2: call {get,size}",
                "    p2->>p1: reply undefined", ""],
    [begin
         Mmd = string:split(read(Config, failing_case, Ext), "\n", all),
         ct:log("~ts:~n~ts", [Ext, lists:join("\n", Mmd)]),
         ?assertEqual(length(Expected), length(Mmd)),
         [?assert(lists:prefix(E, M)) || {E, M} <- lists:zip(Expected, Mmd)],
         ?assert(contains(lists:nth(2, Mmd), "(testcase)")),
         ?assert(contains(lists:nth(3, Mmd), "(sample_server)"))
     end || Ext <- [".messages.mmd", ".seq.mmd"]].

passing_case_leaves_nothing(Config) ->
    ?assertEqual([], trace_files(Config, passing_case)),
    %% ...and its log exists: the case did run.
    ?assert(filelib:is_regular(filename:join(?config(run_dir, Config),
                                             "tracekit_cth_sample_suite.passing_case.html"))).

config_turns_recording_off(Config) ->
    %% {tracekit, false} from init_per_testcase: a failing case, no trace.
    ?assertEqual([], trace_files(Config, failing_untraced)).

always_writes_passing_cases(Config) ->
    %% testcases => #{passing_always => #{always => true}}.
    ?assertEqual(4, length(trace_files(Config, passing_always))),
    Text = read(Config, passing_always, ".txt"),
    ?assert(contains(Text, "tracekit trace of tracekit_cth_sample_SUITE:passing_always (passed)")),
    ?assert(contains(Text, "handle_call/3 -> {reply,blue,#{color => blue}}")),
    %% A record of the suite, from its debug info.
    ?assertMatch({match, _},
                 re:run(Text, "\\(sample_server\\) tracekit_cth_sample_SUITE:handle_call\\("
                        "{get,#sample_key{name = color}}, {<[0-9.]+>,\\[alias\\|#Ref<\\.\\.[0-9]+>\\]}, "
                        "#{color => blue}\\)\n")).

group_options_apply(Config) ->
    %% groups => #{quiet => #{messages => false, seq_trace => false}}: only
    %% the calls, no diagrams.
    Names = [filename:basename(F) || F <- trace_files(Config, group_failing)],
    ?assertEqual(["tracekit_cth_sample_suite.group_failing.tracekit.html",
                  "tracekit_cth_sample_suite.group_failing.tracekit.txt"], lists:sort(Names)),
    Text = read(Config, group_failing, ".txt"),
    ?assert(contains(Text, "handle_call({get,color}")),
    ?assertNot(contains(Text, " << ")),
    ?assertNot(contains(Text, "seq_trace")).

link_in_case_log(Config) ->
    {ok, Html} = file:read_file(filename:join(?config(run_dir, Config),
                                              "tracekit_cth_sample_suite.failing_case.html")),
    [?assertNotEqual(nomatch, binary:match(Html, Link))
     || Link <- [<<"<a href=\"tracekit_cth_sample_suite.failing_case.tracekit.txt\">events</a>">>,
                 <<"<a href=\"tracekit_cth_sample_suite.failing_case.tracekit.html\">HTML report</a>">>,
                 <<"<a href=\"tracekit_cth_sample_suite.failing_case.tracekit.messages.mmd\">">>,
                 <<"<a href=\"tracekit_cth_sample_suite.failing_case.tracekit.seq.mmd\">">>]].

hook_errors_do_not_fail_cases(Config) ->
    %% The case passed (see the counts above) and the hook said why it did
    %% not record, in the case's log.
    ?assertEqual([], trace_files(Config, bad_options_case)),
    {ok, Html} = file:read_file(filename:join(?config(run_dir, Config),
                                              "tracekit_cth_sample_suite.bad_options_case.html")),
    ?assertNotEqual(nomatch, binary:match(Html, <<"tracekit_cth: not recording bad_options_case">>)),
    ?assertNotEqual(nomatch, binary:match(Html, <<"no_such_module:f(">>)).

timetrap_case_lines(Config) ->
    [_Header | Lines] = string:split(read(Config, timetrap_case, ".txt"), "\n", all),
    [L || L <- Lines, L =/= ""].

timetrap_kill_is_recorded(Config) ->
    Lines = timetrap_case_lines(Config),
    ct:log("~ts", [lists:join("\n", Lines)]),
    ?assert(contains(hd(Lines), "(testcase) tracekit_cth_sample_SUITE:timetrap_case([")),
    ?assert(lists:any(fun(L) -> contains(L, "handle_call/3 -> {reply,blue,") end, Lines)),
    %% Killed, so the case function neither returned nor raised: the
    %% body ends with the exit of the test case process, and what CT did
    %% after is left out.
    ?assertEqual([], [L || L <- Lines, contains(L, "timetrap_case/1 ")]),
    ?assert(contains(lists:last(Lines), "(testcase) exited: {timetrap_timeout,1000,")),
    ?assertEqual([], [L || L <- Lines, contains(L, "ct_util_server")]),
    ?assert(contains(read(Config, timetrap_case, ".txt"), "(failed)")).

skipped_case_leaves_nothing(Config) ->
    ?assertEqual([], trace_files(Config, skipped_case)).

%% After the run, no session of the hook, no ring and no seq tracer are
%% left in the node.
nothing_left_in_the_node(Config) ->
    {Sessions, Rings, SeqTracer} = ?config(left, Config),
    ?assertEqual([], [S || {Name, _} = S <- Sessions, Name =:= tracekit orelse Name =:= tracekit_cth]),
    ?assertEqual(0, Rings),
    ?assertEqual(false, SeqTracer).

%%% The hook's options, without Common Test ---------------------------------

%% Every option's value is checked before anything is recorded, with a
%% reason a person can act on.
options_are_checked(_Config) ->
    Why = fun(Opts) ->
                  {error, W} = tracekit_cth:check_options(Opts),
                  W
          end,
    ?assertMatch({ok, #{messages := true, events := 1000, calls := []}},
                 tracekit_cth:check_options(#{messages => true})),
    ?assertMatch({ok, #{groups := #{g := false}}},
                 tracekit_cth:check_options(#{groups => #{g => false}})),
    ?assertEqual("options must be a map, got [x]", Why([x])),
    ?assertEqual("unknown options [colour] (known: [calls,processes,messages,procs,"
                 "seq_trace,events,ring_size,always,depth,line_length,records,nodes,latency,"
                 "slowest,groups,testcases])",
                 Why(#{colour => red})),
    ?assertEqual("slowest must be a positive integer", Why(#{slowest => 0})),
    ?assertMatch({ok, #{latency := [], slowest := 10}}, tracekit_cth:check_options(#{})),
    ?assertEqual("records must be true, false or a list of modules", Why(#{records => [x | y]})),
    ?assertEqual("records must be true, false or a list of modules", Why(#{records => "m"})),
    ?assertMatch({ok, #{records := true}}, tracekit_cth:check_options(#{})),
    ?assertMatch({ok, #{records := [lists]}}, tracekit_cth:check_options(#{records => [lists]})),
    ?assertEqual("messages must be true or false", Why(#{messages => yes})),
    ?assertEqual("always must be true or false", Why(#{always => 1})),
    ?assertEqual("events must be a positive integer", Why(#{events => 0})),
    ?assertEqual("depth must be a positive integer", Why(#{depth => infinity})),
    ?assertEqual("line_length must be an integer of at least 20", Why(#{line_length => 5})),
    ?assert(lists:prefix("ring_size: size is a power of two", Why(#{ring_size => 1000}))),
    ?assertEqual("processes must be a list of pids, registered names and testcase",
                 Why(#{processes => testcase})),
    ?assertEqual("processes must be a list of pids, registered names and testcase",
                 Why(#{processes => [testcase | x]})),
    ?assertEqual("processes must be a list of pids, registered names and testcase",
                 Why(#{processes => ["name"]})),
    ?assertEqual("groups must be a map from names to options (maps, or false)",
                 Why(#{groups => [{g, #{}}]})),
    ?assertEqual("testcases must be a map from names to options (maps, or false)",
                 Why(#{testcases => #{tc => true}})).

start_peer() ->
    Dirs = lists:usort([filename:dirname(code:which(M)) || M <- [tracekit, ?MODULE]]),
    {ok, Peer, _} = peer:start(#{connection => standard_io,
                                 args => lists:append([["-pa", D] || D <- Dirs])}),
    Peer.

%% The hook's calls option with a match spec that turns on send tracing
%% of the caller (a spec tracekit_spec checks without running it, as
%% erlang:match_spec_test/3 would crash the VM): the trace of the case
%% has the call and the send it enabled. On a node of its own, as the
%% hook would take the node down if it went wrong.
calls_with_flag_actions(Config) ->
    Peer = start_peer(),
    try
        Log = filename:join(?config(priv_dir, Config), "flag_actions.html"),
        Spec = {lists, seq, 2, [{'_', [], [{enable_trace, send}]}]},
        Text = peer:call(Peer, ?MODULE, run_hook, [Log, #{calls => [Spec], always => true}]),
        ct:log("~ts", [Text]),
        ?assert(contains(Text, "lists:seq(1, 3)")),
        ?assertMatch({match, _}, re:run(Text, "<[0-9.]+> \\(testcase\\) ! tk_sent -> "
                                              "<[0-9.]+> \\(testcase\\)")),
        ?assertEqual(42, peer:call(Peer, erlang, abs, [-42]))
    after
        peer:stop(Peer)
    end.

%% Options the hook cannot use: it records nothing, and the case is not
%% disturbed.
bad_options_record_nothing(Config) ->
    Peer = start_peer(),
    try
        Dir = ?config(priv_dir, Config),
        [?assertEqual(none, peer:call(Peer, ?MODULE, run_hook,
                                      [filename:join(Dir, "bad_" ++ integer_to_list(I) ++ ".html"),
                                       Opts#{calls => ["lists:seq/2"], always => true}]))
         || {I, Opts} <- lists:enumerate([#{events => 0}, #{depth => 0},
                                          #{processes => x}, #{messages => yes},
                                          #{ring_size => 3}])]
    after
        peer:stop(Peer)
    end.

%% On the peer: the hook's callbacks around a "test case" that calls
%% lists:seq(1, 3) and sends itself a message; the text of the trace
%% file the hook wrote, or none.
run_hook(Log, Opts) ->
    {ok, S0} = tracekit_cth:init(tracekit_cth, Opts),
    Cfg = [{tc_logfile, Log}],
    {ok, S1} = tracekit_cth:post_init_per_testcase(?MODULE, sample, Cfg, ok, S0),
    _ = lists:seq(1, 3),
    self() ! tk_sent,
    receive tk_sent -> ok end,
    {Cfg, S2} = tracekit_cth:pre_end_per_testcase(?MODULE, sample, Cfg, S1),
    {ok, S3} = tracekit_cth:post_end_per_testcase(?MODULE, sample, Cfg, ok, S2),
    ok = tracekit_cth:terminate(S3),
    case file:read_file(filename:rootname(Log) ++ ".tracekit.txt") of
        {ok, Bin} -> unicode:characters_to_list(Bin);
        {error, enoent} -> none
    end.

%% The HTML report of the failing case: well-formed XML, one arrow per
%% message of the case (process trace and seq_trace events of a message
%% make one arrow, with the serial on hover), none lost, and a table row
%% per line of the text file.
html_report_of_failing_case(Config) ->
    %% xmerl reads UTF-8 bytes.
    Html = binary_to_list(unicode:characters_to_binary(read(Config, failing_case, ".html"))),
    [_Header | Lines] = [L || L <- string:split(read(Config, failing_case, ".txt"), "\n", all),
                              L =/= ""],
    {Doc, _} = xmerl_scan:string(Html, [{quiet, true}]),
    Rows = xmerl_xpath:string("//table[@id='event-table']/tbody/tr", Doc),
    %% A row per event: the lines of the text file, and the seq_trace
    %% events that a message's line there stands for too.
    Merged = [L || L <- Lines, re:run(L, " \\[[0-9]+,[0-9]+\\]$") =/= nomatch],
    ?assertEqual(length(Lines) + length(Merged), length(Rows)),
    Arrows = xmerl_xpath:string("//svg[@class='sequence']//g[@class='row']", Doc),
    Labels = [string:trim(text_of(G, "text")) || G <- Arrows],
    ?assertEqual(["call {get,color}", "reply blue", "call {get,size}", "reply undefined"], Labels),
    %% Every arrow has the seq_trace serial in its hover text.
    [?assert(contains(text_of(G, "title"), "serial [")) || G <- Arrows],
    ?assertEqual([], xmerl_xpath:string("//*[@class='msg lost']", Doc)),
    %% The first row is the call of the case, as in the text file.
    ?assert(contains(text_of(hd(Rows), "td[3]"), "tracekit_cth_sample_SUITE:failing_case([")),
    %% One printing: each line of the text file is the row of its event
    %% (a merged line: that row and the seq_trace serial after it), with
    %% the same short references.
    RowTexts = [text_of(R, "td[3]") || R <- Rows],
    [?assert(lists:any(fun(R) -> L =:= R orelse lists:prefix(R ++ " ", L) end, RowTexts), L)
     || L <- Lines],
    ?assert(lists:any(fun(R) -> contains(R, "#Ref<..") end, RowTexts)),
    ?assertNot(lists:any(fun(R) -> contains(R, "#Ref<0.") end, RowTexts)).

text_of(Node, Path) ->
    lists:flatten([V || #xmlText{value = V} <- xmerl_xpath:string(Path ++ "//text()", Node)]).

%% A case that traces every function of the modules tracekit uses: the
%% processes of the hook's recording (the case wrote them down) have no
%% line in its trace, and the case's own calls are there.
own_work_is_not_recorded(Config) ->
    Text = read(Config, own_work_case, ".txt"),
    [Priv] = filelib:wildcard(filename:join(?config(run_dir, Config),
                                            "log_private/own_pids")),
    {ok, OwnText} = file:read_file(Priv),
    Own = string:split(unicode:characters_to_list(OwnText), " ", all),
    Lines = string:split(Text, "\n", all),
    Pids = lists:usort([P || L <- Lines,
                             {match, [P]} <- [re:run(L, "^[0-9:.]+ (<[0-9.]+>)",
                                                     [{capture, all_but_first, list}])]]),
    ct:log("tracekit's ~p; in the trace ~p", [Own, Pids]),
    ?assert(length(Own) >= 2),
    ?assertEqual([], [P || P <- Pids, lists:member(P, Own)]),
    ?assert(lists:any(fun(L) -> contains(L, "lists:seq(1, 3)") end, Lines)).

%% The latency option: the failing case's text file ends with its slowest
%% functions (slow_step/1, two calls of 30 ms, before quick_step/1), and
%% its HTML report has a Latency section with a histogram per function.
slowest_functions_of_failing_case(Config) ->
    Text = read(Config, slow_failing_case, ".txt"),
    ct:log("~ts", [Text]),
    [_, Table] = string:split(Text, "slowest functions of the case, by their slowest call"),
    [Head, _Columns, Slow, Quick | _] = string:split(Table, "\n", all),
    ?assert(contains(Head, "tracekit_cth_sample_SUITE:slow_step/1")),
    ?assert(contains(Head, "12 calls measured, 0 unfinished")),
    ?assertMatch(["tracekit_cth_sample_SUITE:slow_step/1", "2" | _], string:lexemes(Slow, " ")),
    ?assertMatch(["tracekit_cth_sample_SUITE:quick_step/1", "10" | _], string:lexemes(Quick, " ")),
    [_, _, _, _, _, _, Max | _] = string:lexemes(Slow, " "),
    ?assertMatch({match, _}, re:run(Max, "^(3[0-9]|[4-9][0-9])\\.[0-9]ms$")),
    Html = binary_to_list(unicode:characters_to_binary(read(Config, slow_failing_case, ".html"))),
    {Doc, _} = xmerl_scan:string(Html, [{quiet, true}]),
    Svgs = xmerl_xpath:string("//*[local-name()='svg' and @class='latency']", Doc),
    ?assertEqual(["tracekit_cth_sample_SUITE:slow_step/1", "tracekit_cth_sample_SUITE:quick_step/1"],
                 [V || #xmlElement{attributes = As} <- Svgs,
                       #xmlAttribute{name = 'data-mfa', value = V} <- As]),
    Bars = xmerl_xpath:string("//*[local-name()='svg' and @class='latency'][1]"
                              "//*[local-name()='rect' and @class='bar']", Doc),
    %% The two calls, in one bar or in two (a loaded machine can make one
    %% of the 30 ms sleeps last into the next bucket).
    Ns = [list_to_integer(V) || #xmlElement{attributes = As} <- Bars,
                                #xmlAttribute{name = 'data-n', value = V} <- As],
    ?assertEqual(2, lists:sum(Ns)),
    ?assert(length(Ns) =< 2).

%% The hook with no options records the test case process's messages,
%% process events and seq_trace flow, writes them when the case fails,
%% and said once in the suite's log what it records.
bare_hook_records_the_case(Config) ->
    Dir = ?config(bare_dir, Config),
    Base = filename:join(Dir, "tracekit_cth_bare_suite.bare_failing.tracekit"),
    ?assertEqual(lists:sort([Base ++ X || X <- [".html", ".messages.mmd", ".seq.mmd", ".txt"]]),
                 lists:sort(filelib:wildcard(Base ++ "*"))),
    {ok, Bin} = file:read_file(Base ++ ".txt"),
    Text = unicode:characters_to_list(Bin),
    ct:log("~ts", [Text]),
    ?assert(contains(Text, "(testcase) ! {ping,")),
    ?assert(contains(Text, "(testcase) << pong")),
    ?assert(contains(Text, "(testcase) spawned ")),
    Logs = [unicode:characters_to_list(B) || F <- filelib:wildcard(filename:join(Dir, "*.html")),
                                             {ok, B} <- [file:read_file(F)]],
    Said = [L || L <- Logs, contains(L, "tracekit_cth records in each test case the messages "
                                        "and the process events of the test case process; "
                                        "the seq_trace flow")],
    ?assertEqual(1, length(Said)).
