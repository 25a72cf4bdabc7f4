%% tracekit:slow/2 with real processes: only the slow calls (and those
%% that raise) are kept, each whole (its nested calls, messages,
%% scheduling) in a trace file that reads back and a report page;
%% outermost calls of a recursive function; sampling; the most calls and
%% bytes kept; processes that never call the spec stay silent; two peer
%% nodes; bad input.
-module(tracekit_slow_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include_lib("kernel/include/file.hrl").

-export([suite/0, all/0, init_per_testcase/2, end_per_testcase/2]).
-export([only_slow_calls_each_whole/1, exceptions_are_kept/1, outermost_of_recursion/1,
         sampling/1, max_captures_ends_the_trace/1, max_bytes_cuts_a_call/1,
         bystanders_stay_silent/1, printed_at_the_shell/1, two_peer_nodes/1,
         bad_input/1, given_timestamps/1, held_calls_bounded/1, killed_mid_call/1]).
%% The traced functions, and what runs on other nodes.
-export([handle/2, inner/1, leaf/1, server/0, rec/2, chatty/2, bystander/1, worker/3,
         forever/0]).

suite() ->
    [{timetrap, {minutes, 3}}].

all() ->
    [only_slow_calls_each_whole, exceptions_are_kept, outermost_of_recursion, sampling,
     max_captures_ends_the_trace, max_bytes_cuts_a_call, bystanders_stay_silent,
     printed_at_the_shell, two_peer_nodes, bad_input, given_timestamps, held_calls_bounded,
     killed_mid_call].

init_per_testcase(Case, Config) ->
    Dir = filename:join(?config(priv_dir, Config), Case),
    ok = file:make_dir(Dir),
    [{dir, Dir}, {io, tk_capture:start()} | Config].

end_per_testcase(_, Config) ->
    ok = tracekit:stop(),
    tk_capture:stop(?config(io, Config)),
    ok.

%%% The traced functions ------------------------------------------------------------

%% A request: slow ones ask a server and sleep; fast ones do neither.
handle({slow, I}, Srv) ->
    Srv ! {self(), ping},
    receive pong -> ok end,
    timer:sleep(60),
    inner(I);
handle({fast, I}, _Srv) ->
    inner(I);
handle({raise, I}, _Srv) ->
    error({raised, I}).

inner(I) -> leaf(I) + 1.

leaf(I) -> I * 2.

server() ->
    receive
        {From, ping} -> From ! pong, server();
        stop -> ok
    end.

rec(0, Ms) -> timer:sleep(Ms), 0;
rec(N, Ms) -> 1 + ?MODULE:rec(N - 1, Ms).

%% Sends N messages to itself and takes them back, then sleeps.
chatty(N, Ms) ->
    [self() ! {note, I, lists:seq(1, 20)} || I <- lists:seq(1, N)],
    [receive {note, I, _} -> ok end || I <- lists:seq(1, N)],
    timer:sleep(Ms).

forever() ->
    receive never -> ok end.

bystander(N) ->
    [?MODULE:leaf(I) || I <- lists:seq(1, N)],
    ok.

%% A process that waits for go, then makes the requests, and says done.
worker(Requests, Srv, Parent) ->
    spawn(fun() ->
                  receive go -> ok end,
                  [try ?MODULE:handle(R, Srv) catch error:_ -> raised end || R <- Requests],
                  Parent ! {done, self()}
          end).

%%% Helpers ------------------------------------------------------------------------

-define(OVER_MS, 25).

spec() -> {?MODULE, handle, 2}.

run(Requests) ->
    Srv = spawn(fun server/0),
    W = worker(Requests, Srv, self()),
    W ! go,
    receive {done, W} -> ok after 30000 -> error(worker_timeout) end,
    Srv ! stop,
    W.

stop(T) ->
    {ok, S} = tracekit:stop(T),
    ct:log("~p", [S]),
    S.

arg(#{file := File}) ->
    {ok, [First | _]} = tracekit_file:read(File),
    {trace_ts, _, call, {?MODULE, handle, [Arg, _]}, _Caller, _} = First,
    Arg.

tags(Events) -> [element(3, E) || E <- Events].

%% A kept call's file: read back, its first event the call of the spec,
%% its last the return (or exception) of it, mode 0600.
read_capture(#{file := File, report := Report, events := N, mfa := MFA} = C) ->
    {ok, Events} = tracekit_file:read(File),
    ?assertEqual(N, length(Events)),
    %% (The call of the spec has where it was called from: {caller}.)
    {trace_ts, _, call, {M, F, Args}, _Caller, _} = hd(Events),
    ?assertEqual(MFA, {M, F, length(Args)}),
    End = case maps:get(result, C) of return -> return_from; exception -> exception_from end,
    ?assertMatch({trace_ts, _, End, MFA, _, _}, lists:last(Events)),
    {ok, #file_info{mode = Mode}} = file:read_file_info(File),
    ?assertEqual(8#600, Mode band 8#777),
    {ok, Html} = file:read_file(Report),
    {M1, F1, A1} = MFA,
    ?assertMatch({_, _}, binary:match(Html, iolist_to_binary(io_lib:format("~w:~w/~w took",
                                                                             [M1, F1, A1])))),
    Events.

%%% Cases ----------------------------------------------------------------------------

%% Ten requests, three slow: the three are kept, each whole: its nested
%% calls (and where they returned to), the message to the server and the
%% answer, the time it was scheduled out; the fast ones are let go, and a
%% kept call that is not one of the three really took the threshold.
only_slow_calls_each_whole(Config) ->
    Requests = [case I rem 4 of 0 -> {slow, I}; _ -> {fast, I} end || I <- lists:seq(1, 10)],
    {ok, T} = tracekit:slow(spec(), #{over => {?OVER_MS, ms}, print => false,
                                      dir => ?config(dir, Config)}),
    run(Requests),
    #{captures := Kept, counters := C, reason := stopped, dropped := 0} = stop(T),
    ?assertMatch(#{calls := 10, looked_at := 10, unfinished := 0}, C),
    Slow = [R || {slow, _} = R <- Requests],
    Args = [arg(K) || K <- Kept],
    ?assertEqual([], Slow -- Args),
    [?assert(D >= ?OVER_MS * 1000) || #{duration := D} <- Kept],
    ?assertEqual(length(Kept), maps:get(kept, C)),
    ?assertEqual(10 - length(Kept), maps:get(fast, C)),
    [begin
         Events = read_capture(K),
         Tags = tags(Events),
         ?assert(lists:any(fun({trace_ts, _, call, {?MODULE, inner, [X]}, _}) -> X =:= I;
                              (_) -> false end, Events)),
         ?assert(lists:any(fun({trace_ts, _, call, {?MODULE, leaf, [X]}, _}) -> X =:= I;
                              (_) -> false end, Events)),
         ?assert(lists:any(fun({trace_ts, _, return_to, {?MODULE, inner, 1}, _}) -> true;
                              (_) -> false end, Events)),
         ?assert(lists:any(fun({trace_ts, _, send, {_, ping}, _, _}) -> true;
                              (_) -> false end, Events)),
         ?assert(lists:any(fun({trace_ts, _, 'receive', pong, _}) -> true;
                              (_) -> false end, Events)),
         ?assert(lists:member(out, Tags) andalso lists:member(in, Tags)),
         ?assertEqual(0, maps:get(cut, K)),
         %% Each event of the file is one of the process that called.
         [Pid] = lists:usort([element(2, E) || E <- Events]),
         ?assertEqual(maps:get(pid, K), Pid)
     end || #{} = K <- Kept, {slow, I} <- [arg(K)]].

%% A call that raises is kept however quick it was, as an exception.
exceptions_are_kept(Config) ->
    {ok, T} = tracekit:slow(spec(), #{over => {10, s}, print => false,
                                      dir => ?config(dir, Config)}),
    run([{fast, 1}, {raise, 2}, {fast, 3}]),
    #{captures := [K], counters := #{calls := 3, fast := 2, kept := 1}} = stop(T),
    ?assertMatch(#{result := exception, mfa := {?MODULE, handle, 2}}, K),
    ?assert(maps:get(duration, K) < 10000000),
    Events = read_capture(K),
    ?assertMatch({trace_ts, _, exception_from, _, {error, {raised, 2}}, _}, lists:last(Events)).

%% A recursive function: the outermost call is the one kept, the calls
%% inside it are part of it.
outermost_of_recursion(Config) ->
    {ok, T} = tracekit:slow({?MODULE, rec, 2}, #{over => {?OVER_MS, ms}, print => false,
                                                 dir => ?config(dir, Config)}),
    Self = self(),
    P = spawn(fun() -> receive go -> ?MODULE:rec(5, 40), Self ! {done, self()} end end),
    P ! go,
    receive {done, P} -> ok end,
    #{captures := [K], counters := #{calls := 1, kept := 1}} = stop(T),
    Events = read_capture(K),
    ?assertEqual(6, length([E || {trace_ts, _, call, {?MODULE, rec, _}, _, _} = E <- Events])),
    ?assertEqual(6, length([E || {trace_ts, _, return_from, {?MODULE, rec, 2}, _, _} = E <- Events])),
    {trace_ts, _, call, {?MODULE, rec, [5, 40]}, _, _} = hd(Events),
    ?assertMatch({trace_ts, _, return_from, _, 5, _}, lists:last(Events)).

%% sample => 3: only every third call is looked at; of eight slow ones,
%% three are kept (the 1st, 4th and 7th).
sampling(Config) ->
    {ok, T} = tracekit:slow(spec(), #{over => {?OVER_MS, ms}, print => false, sample => 3,
                                      dir => ?config(dir, Config)}),
    run([{slow, I} || I <- lists:seq(1, 8)]),
    #{captures := Kept, counters := C} = stop(T),
    ?assertMatch(#{calls := 8, looked_at := 3, kept := 3}, C),
    ?assertEqual([{slow, 1}, {slow, 4}, {slow, 7}], [arg(K) || K <- Kept]).

%% The trace ends at the last call it may keep.
max_captures_ends_the_trace(Config) ->
    {ok, T} = tracekit:slow(spec(), #{over => {?OVER_MS, ms}, print => false, max_captures => 2,
                                      dir => ?config(dir, Config)}),
    Srv = spawn(fun server/0),
    W = worker([{slow, I} || I <- lists:seq(1, 6)], Srv, self()),
    Mon = monitor(process, T),
    W ! go,
    receive {'DOWN', Mon, process, T, _} -> ok after 20000 -> error(not_ended) end,
    S = receive {tracekit, T, done, Sum} -> Sum end,
    ct:log("~p", [S]),
    ?assertMatch(#{reason := {max_captures, 2}, captures := [_, _]}, S),
    ?assertEqual([{slow, 1}, {slow, 2}], [arg(K) || K <- maps:get(captures, S)]),
    %% The files are in a directory of the trace's own, in dir.
    #{dir := Own} = S,
    ?assertEqual(?config(dir, Config), filename:dirname(Own)),
    ?assertEqual(2, length(filelib:wildcard(filename:join(Own, "slow-*.tkt")))),
    receive {done, W} -> ok end.

%% A call with more events than max_bytes keeps its first events and its
%% return, and counts what it left out.
max_bytes_cuts_a_call(Config) ->
    {ok, T} = tracekit:slow({?MODULE, chatty, 2}, #{over => {?OVER_MS, ms}, print => false,
                                                    max_bytes => 4096, ring_size => 16 bsl 20,
                                                    dir => ?config(dir, Config)}),
    Self = self(),
    P = spawn(fun() -> receive go -> ?MODULE:chatty(500, 40), Self ! {done, self()} end end),
    P ! go,
    receive {done, P} -> ok end,
    #{captures := [K], counters := #{cut := Cut}} = stop(T),
    ?assert(Cut > 500),
    ?assertEqual(Cut, maps:get(cut, K)),
    Events = read_capture(K),
    ?assert(lists:sum([erlang:external_size(E) || E <- lists:droplast(Events)]) =< 4096).

%% Twenty processes in slow calls at once, each with more events than
%% max_bytes: together the calls held never hold more than 8 times
%% max_bytes, whatever each could; every call is still kept, with its
%% return, and what was left out counted.
held_calls_bounded(Config) ->
    {ok, T} = tracekit:slow({?MODULE, chatty, 2}, #{over => {?OVER_MS, ms}, print => false,
                                                    max_bytes => 8192, max_captures => 20,
                                                    ring_size => 16 bsl 20,
                                                    dir => ?config(dir, Config)}),
    Self = self(),
    Ps = [spawn(fun() -> receive go -> ?MODULE:chatty(150, 100), Self ! {done, self()} end end)
          || _ <- lists:seq(1, 20)],
    [P ! go || P <- Ps],
    [receive {done, P} -> ok end || P <- Ps],
    #{captures := Kept, counters := #{kept := 20, cut := Cut}, dropped := 0} = stop(T),
    ?assertEqual(20, length(Kept)),
    %% Bytes of each call's events between its call and its end (each
    %% call's first event and its end are kept whatever the bounds).
    Bytes = [lists:sum([erlang:external_size(E) || E <- tl(lists:droplast(read_capture(K)))])
             || K <- Kept],
    ct:log("bytes kept per call: ~w (~w in all); cut ~w", [Bytes, lists:sum(Bytes), Cut]),
    [?assert(B =< 8192) || B <- Bytes],
    %% All twenty were open together (each sleeps 100 ms after its
    %% messages): what they held together stayed within 8 x 8192.
    ?assert(lists:sum(Bytes) =< 8 * 8192),
    ?assertEqual(Cut, lists:sum([C || #{cut := C} <- Kept])).

%% Processes that never call the spec make no events: a process making
%% 20,000 calls beside the trace adds nothing to what is let go.
bystanders_stay_silent(Config) ->
    {ok, T} = tracekit:slow(spec(), #{over => {?OVER_MS, ms}, print => false,
                                      dir => ?config(dir, Config)}),
    Self = self(),
    B = spawn(fun() -> receive go -> ?MODULE:bystander(20000), Self ! {done, self()} end end),
    B ! go,
    receive {done, B} -> ok end,
    run([{slow, 1}]),
    #{captures := [_], counters := #{outside := Outside}} = stop(T),
    ?assert(Outside < 1000).

%% At the shell: the header, a line per kept call naming its page, the
%% summary line.
printed_at_the_shell(Config) ->
    Io = ?config(io, Config),
    {ok, _} = tracekit:slow("tracekit_slow_SUITE:handle/2", #{over => {?OVER_MS, ms}, io => Io,
                                      dir => ?config(dir, Config)}),
    run([{fast, 1}, {slow, 2}]),
    ok = tracekit:stop(),
    Text = tk_capture:text(Io),
    ct:log("~ts", [Text]),
    ?assertMatch({match, _}, re:run(Text, "tracekit: tracing the calls over 25.0ms of "
                                    "tracekit_slow_SUITE:handle/2")),
    ?assertMatch({match, _}, re:run(Text, "<[0-9.]+> tracekit_slow_SUITE:handle/2 took "
                                    "[0-9.]+ms \\(return\\), [0-9]+ events: .*slow-1.html")),
    ?assertMatch({match, _}, re:run(Text, "2 calls of the spec, 2 looked at: 1 kept, 1 fast")).

%% A peer node and this one: the slow call made on the peer is kept,
%% with its node, and its file reads back here.
two_peer_nodes(Config) ->
    Started = start_dist(),
    Dirs = lists:usort([filename:dirname(code:which(M)) || M <- [tracekit, ?MODULE]]),
    {ok, P, N} = peer:start_link(#{name => peer:random_name(?MODULE),
                                   args => lists:append([["-pa", D] || D <- Dirs])}),
    try
        {ok, T} = tracekit:slow(spec(), #{over => {?OVER_MS, ms}, print => false,
                                          nodes => [node(), N], dir => ?config(dir, Config)}),
        Self = self(),
        Remote = erpc:call(N, fun() ->
                                      Srv = spawn(fun ?MODULE:server/0),
                                      ?MODULE:worker([{fast, 1}, {slow, 2}], Srv, Self)
                              end),
        Remote ! go,
        receive {done, Remote} -> ok after 30000 -> error(remote_timeout) end,
        run([{slow, 3}]),
        #{captures := Kept, counters := #{calls := 3}} = stop(T),
        ByArg = maps:from_list([{arg(K), K} || K <- Kept]),
        ?assertMatch(#{node := N, pid := Remote}, maps:get({slow, 2}, ByArg)),
        ?assertMatch(#{node := Here} when Here =:= node(), maps:get({slow, 3}, ByArg)),
        [read_capture(K) || K <- Kept]
    after
        peer:stop(P),
        [net_kernel:stop() || Started]
    end.

start_dist() ->
    case node() of
        nonode@nohost ->
            _ = os:cmd("epmd -daemon"),
            timer:sleep(200),
            %% (A name of this OS process's: another run of the suite on
            %% the machine has its own.)
            Name = list_to_atom("tracekit_slow_ct_" ++ os:getpid()),
            {ok, _} = net_kernel:start(Name, #{name_domain => shortnames}),
            true;
        _ ->
            false
    end.

%% Bad specs and options: {error, Reason} in the shell's shapes, and
%% nothing traced.
bad_input(Config) ->
    Dir = ?config(dir, Config),
    ?assertMatch({error, {bad_spec, _, "module tracekit_slow_SUITE has no function nope" ++ _}},
                 tracekit:slow({?MODULE, nope, 1}, #{dir => Dir})),
    ?assertMatch({error, {bad_option, {over, 5}, "over: {Amount, us | ms | s}" ++ _}},
                 tracekit:slow(spec(), #{over => 5, dir => Dir})),
    ?assertMatch({error, {bad_option, {over, {-1, ms}}, _}},
                 tracekit:slow(spec(), #{over => {-1, ms}, dir => Dir})),
    ?assertMatch({error, {bad_option, {sample, -2}, "sample: a positive integer"}},
                 tracekit:slow(spec(), #{sample => -2, dir => Dir})),
    ?assertMatch({error, {bad_option, {max_captures, 0}, _}},
                 tracekit:slow(spec(), #{max_captures => 0, dir => Dir})),
    ?assertMatch({error, {bad_option, {max_bytes, 10}, _}},
                 tracekit:slow(spec(), #{max_bytes => 10, dir => Dir})),
    ?assertMatch({error, {bad_option, {dir, "/no/such/dir"}, "dir: an existing directory"}},
                 tracekit:slow(spec(), #{dir => "/no/such/dir"})),
    ?assertMatch({error, {bad_option, {dir, {1}}, _}}, tracekit:slow(spec(), #{dir => {1}})),
    ?assertMatch({error, {bad_option, {threshold, 5}, "unknown option threshold" ++ _}},
                 tracekit:slow(spec(), #{threshold => 5, dir => Dir})),
    ?assertMatch({error, {bad_option, _, _}}, tracekit:slow(spec(), not_a_map)),
    ?assertEqual([], [S || {tracekit, _} = S <- trace:session_info(all)]),
    ?assertEqual({ok, []}, file:list_dir(Dir)).

%% The recording tracers' callbacks take an event made earlier with its
%% own time, {Kind, Ts} (as the slow trace writes the calls it keeps):
%% the event reads back with that time, and in the order of those times
%% in a trace file; a time of the wrong shape records no time at all.
given_timestamps(Config) ->
    {ok, R} = tracekit_ring:new(#{}),
    Good = [{timestamp, {1795, 643132, 9209}}, {monotonic, -576460751000000000},
            {strict_monotonic, {-5, 7}}, {cpu_timestamp, {0, 1, 2}}],
    Bad = [{timestamp, {1, 2}}, {timestamp, {-1, 2, 3}}, {timestamp, {a, 2, 3}},
           {monotonic, 1.5}, {monotonic, 1 bsl 64}, {strict_monotonic, {1, x}},
           {cpu_timestamp, [1, 2, 3]}, {nope, 1}, {timestamp}, {timestamp, 1, 2}, 42,
           {timestamp, {1 bsl 70, 0, 0}}],
    [ok = tracekit_ring:trace(send, R, self(), I, #{extra => self(), timestamp => T})
     || {I, T} <- lists:enumerate(Good ++ Bad)],
    Events = tracekit_ring:drain(R),
    tracekit_ring:close(R),
    N = length(Good),
    ?assertEqual([{trace_ts, self(), send, I, self(), Ts} || {I, {_, Ts}} <- lists:enumerate(Good)],
                 lists:sublist(Events, N)),
    ?assertEqual([{trace, self(), send, I, self()} || I <- lists:seq(N + 1, N + length(Bad))],
                 lists:nthtail(N, Events)),
    %% In a file: events of 3, 2 and 1 s ago read back with their times,
    %% and tracekit-cat prints those times, not the time they were
    %% written (it prints a record's stamp, taken as far back as its time
    %% is).
    File = filename:join(?config(dir, Config), "given.tkt"),
    {ok, F} = tracekit_file:new(#{path => File}),
    Now = erlang:system_time(microsecond),
    Times = [Now - 3000000, Now - 2000000, Now - 1000000],
    [ok = tracekit_file:trace(send, F, self(), I, #{extra => self(),
                                                     timestamp => {timestamp, now_ts(T)}})
     || {I, T} <- lists:zip([1, 2, 3], Times)],
    ok = tracekit_file:close(F),
    {ok, Read} = tracekit_file:read(File),
    ?assertEqual([now_ts(T) || T <- Times], [element(6, E) || E <- Read]),
    Cat = os:cmd(filename:join(code:priv_dir(tracekit), "bin/tracekit-cat") ++ " " ++ File),
    ct:log("~ts", [Cat]),
    Seconds = [calendar:system_time_to_rfc3339(T div 1000000, [{offset, "Z"}]) || T <- Times],
    [?assertMatch({_, _}, binary:match(list_to_binary(Cat), list_to_binary(lists:droplast(S))))
     || S <- Seconds].

now_ts(Us) ->
    {Us div 1000000000000, Us div 1000000 rem 1000000, Us rem 1000000}.

%% A process killed inside a call of the spec: the call is unfinished,
%% nothing is kept of it, and what it held is let go then (its exit is
%% one of the events the spec turned on).
killed_mid_call(Config) ->
    {ok, T} = tracekit:slow({?MODULE, forever, 0}, #{over => {1, ms}, print => false,
                                                     dir => ?config(dir, Config)}),
    Ps = [spawn(fun() -> ?MODULE:forever() end) || _ <- lists:seq(1, 5)],
    timer:sleep(100),
    [exit(P, kill) || P <- Ps],
    timer:sleep(100),
    #{captures := [], counters := C, dir := Own} = stop(T),
    ?assertMatch(#{calls := 5, unfinished := 5, exited := 5, kept := 0, fast := 0}, C),
    ?assertEqual({ok, []}, file:list_dir(Own)).
