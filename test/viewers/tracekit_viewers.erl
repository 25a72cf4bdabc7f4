%% The known workloads that `make test-viewers' opens in real viewers:
%% a traced client and server exported as Chrome JSON, folded stacks and
%% JSON Lines, and the HTML report of the failing case of the Common
%% Test hook's sample suite. Each writes what the checks expect beside it
%% (`*.expect.json').
-module(tracekit_viewers).

-export([main/1, server/0, handle/1, compute/1, fib/1]).

%% erl -noshell -run tracekit_viewers main OutDir SampleSrc
main([Dir0, SampleSrc0]) ->
    Dir = filename:absname(Dir0),
    SampleSrc = filename:absname(SampleSrc0),
    ok = filelib:ensure_path(Dir),
    try
        workload(Dir),
        cth_report(Dir, SampleSrc),
        halt(0)
    catch
        C:E:S ->
            io:format(standard_error, "tracekit_viewers: ~tp:~tp~n~tp~n", [C, E, S]),
            halt(1)
    end.

server() ->
    receive
        {req, From, N} -> From ! {resp, handle(N)}, server();
        stop -> ok
    end.

handle(N) -> compute(N).

compute(N) -> timer:sleep(1), fib(N).

fib(0) -> 0;
fib(1) -> 1;
fib(N) -> fib(N - 1) + fib(N - 2).

workload(Dir) ->
    {ok, R} = tracekit_ring:new(#{size => 1 bsl 22}),
    S = trace:session_create(viewers, {tracekit_ring, R}, []),
    Srv = spawn(fun server/0),
    Parent = self(),
    Client = spawn(fun() ->
                           register(viewers_client, self()),
                           receive go -> ok end,
                           [begin Srv ! {req, self(), 12}, receive {resp, _} -> ok end end
                            || _ <- lists:seq(1, 5)],
                           Parent ! done
                   end),
    1 = trace:process(S, Srv, true, [call, send, 'receive', running, procs, timestamp]),
    1 = trace:process(S, Client, true, [send, 'receive', procs, timestamp]),
    register(viewers_server, Srv),
    _ = [trace:function(S, {?MODULE, F, 1}, [{'_', [], [{return_trace}]}], [local])
         || F <- [handle, compute, fib]],
    Client ! go,
    receive done -> ok end,
    Srv ! stop,
    timer:sleep(50),
    trace:session_destroy(S),
    Events = tracekit_ring:drain(R),
    ok = tracekit_ring:close(R),
    Names = #{Client => viewers_client},
    {ok, N} = tracekit_export:chrome(Events, filename:join(Dir, "workload.json"), #{names => Names}),
    {ok, N} = tracekit_export:folded(Events, filename:join(Dir, "workload.folded"), #{names => Names}),
    {ok, N} = tracekit_export:jsonl(Events, filename:join(Dir, "workload.jsonl"), #{names => Names}),
    Expect = #{frames => [<<"tracekit_viewers:compute/1">>, <<"tracekit_viewers:fib/1">>,
                          <<"tracekit_viewers:handle/1">>],
               tracks => [label(Srv, viewers_server), label(Client, viewers_client)],
               events => N},
    ok = file:write_file(filename:join(Dir, "workload.expect.json"), json:encode(Expect)).

label(Pid, Name) ->
    iolist_to_binary([tracekit_export:term_text(Pid, node()), " (", atom_to_list(Name), ")"]).

%% The sample suite of the hook's tests, run by Common Test here; its
%% failing_case asks the server for a key it does not have.
cth_report(Dir, SampleSrc) ->
    Work = filename:join(Dir, "cth"),
    _ = file:del_dir_r(Work),
    ok = filelib:ensure_path(filename:join(Work, "logs")),
    Suite = filename:join(Work, "tracekit_cth_sample_SUITE.erl"),
    {ok, _} = file:copy(SampleSrc, Suite),
    _ = ct:run_test([{suite, Suite}, {logdir, filename:join(Work, "logs")},
                     {auto_compile, true}, {verbosity, 0}]),
    [Html] = filelib:wildcard(filename:join(Work, "logs/ct_run.*/*/run.*/"
                                            "tracekit_cth_sample_suite.failing_case.tracekit.html")),
    Txt = filename:rootname(Html) ++ ".txt",
    {ok, Text} = file:read_file(Txt),
    [_Header | Lines] = binary:split(Text, <<"\n">>, [global, trim_all]),
    {ok, _} = file:copy(Html, filename:join(Dir, "report.html")),
    Expect = #{rows => length(Lines),
               arrows => [<<"call {get,color}">>, <<"reply blue">>, <<"call {get,size}">>,
                          <<"reply undefined">>]},
    ok = file:write_file(filename:join(Dir, "report.expect.json"), json:encode(Expect)).
