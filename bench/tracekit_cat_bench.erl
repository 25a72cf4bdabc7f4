%% @doc `make bench', trace files: what reading and exporting a trace file
%% of N events (default 10,000,000) costs, events per second and peak
%% memory, for `tracekit-cat' (text, dbg) and for the exports of
%% tracekit_export and tracekit_report (chrome, jsonl, folded, html), each
%% in a VM of its own writing to a file deleted after; beside dbg's
%% trace_client printing events of dbg's own file port.
%%
%% The file is a client and a server traced with timestamps: the client
%% sends a request, the server receives it, calls a traced function that
%% returns, and sends a reply that the client receives (six events a
%% round). It is made once into `Dir' and reused by later runs (it takes
%% about a minute); `make clean' removes it.
%%
%% Peak memory is /usr/bin/time's maximum resident set size of the whole
%% process (for the exports: the VM's, which is about 60 MiB before it
%% reads anything). Wall time moves with the machine's load; the CPU time
%% (user + system) beside it moves less.
-module(tracekit_cat_bench).

-export([main/1, export/2, dbg_format/1, server/0, handle/1]).

main([Cat, Dir]) ->
    N = case os:getenv("TRACEKIT_CAT_BENCH_EVENTS") of
            false -> 10000000;
            S -> list_to_integer(S)
        end,
    Small = min(N, 200000),
    ok = filelib:ensure_path(filename:join(Dir, "x")),
    Tk = filename:join(Dir, "mixed-" ++ integer_to_list(N) ++ ".tkt"),
    Dbg = filename:join(Dir, "sends-" ++ integer_to_list(Small) ++ ".dbg"),
    Events = made(Tk, fun() -> write_mixed(Tk, N) end),
    DbgEvents = made(Dbg, fun() -> write_dbg(Dbg, Small) end),
    io:format("trace files: ~w events of a client and a server (~.1f MiB), read and exported~n",
              [Events, filelib:file_size(Tk) / 1048576]),
    Rows = [measure("tracekit-cat --format text", Events, [Cat, Tk]),
            measure("tracekit-cat --format dbg", Events, [Cat, "--format", "dbg", Tk])]
        ++ [measure("tracekit_export:" ++ atom_to_list(F) ++ "/2", Events, vm(F, Tk))
            || F <- [chrome, jsonl, folded]]
        ++ [measure("tracekit_report:write/2", Events, vm(html, Tk)),
            measure("dbg:trace_client (printing)", DbgEvents, vm(dbg, Dbg))],
    io:format("~-34s ~10s ~11s ~13s ~9s~n",
              ["", "events", "events/s", "events/cpu-s", "peak MiB"]),
    [case R of
         {Label, E, {ok, Wall, Cpu, Kb}} ->
             io:format("~-34s ~10w ~11w ~13w ~9.1f~n",
                       [Label, E, round(E / max(Wall, 0.001)), round(E / max(Cpu, 0.001)),
                        Kb / 1024]);
         {Label, E, {error, Why}} ->
             io:format("~-34s ~10w  failed: ~ts~n", [Label, E, Why])
     end || R <- Rows],
    Rate = fun(L) -> hd([E / W || {L0, E, {ok, W, _, _}} <- Rows, L0 =:= L] ++ [0]) end,
    io:format("tracekit-cat text: ~.1f x dbg:trace_client's rate (target 20)~n",
              [Rate("tracekit-cat --format text")
               / max(Rate("dbg:trace_client (printing)"), 1)]),
    ok.

%% A file made before (its event count beside it), or made now.
made(Path, Make) ->
    Count = Path ++ ".count",
    case file:read_file(Count) of
        {ok, Bin} when is_binary(Bin) ->
            case filelib:is_regular(Path) of
                true -> binary_to_integer(string:trim(Bin));
                false -> make(Path, Count, Make)
            end;
        _ ->
            make(Path, Count, Make)
    end.

make(Path, Count, Make) ->
    _ = file:delete(Path),
    T0 = erlang:monotonic_time(millisecond),
    N = Make(),
    io:format("made ~ts: ~w events in ~.1f s~n",
              [Path, N, (erlang:monotonic_time(millisecond) - T0) / 1000]),
    ok = file:write_file(Count, integer_to_list(N)),
    N.

%% A VM that runs one export of the file, its output thrown away.
vm(What, File) ->
    ["erl", "-noshell", "-pa", filename:dirname(code:which(tracekit_export)),
     "-pa", filename:dirname(code:which(?MODULE)),
     "-eval", "tracekit_cat_bench:" ++ case What of
                                          dbg -> "dbg_format(\"" ++ File ++ "\")";
                                          _ -> "export(" ++ atom_to_list(What) ++ ", \""
                                                   ++ File ++ "\")"
                                      end ++ ", halt()."].

%% (Into a file of a private directory, deleted after: the exports and
%% the report write regular files only, never through /dev/null.)
export(What, File) ->
    {ok, Dir} = tracekit_private:dir(tracekit_private:temp_dir(), "tracekit-bench-"),
    Out = filename:join(Dir, "out"),
    try
        case What of
            html -> {ok, #{}} = tracekit_report:write(File, Out);
            Format -> {ok, _} = tracekit_export:Format(File, Out)
        end
    after
        tracekit_private:delete_dir(Dir)
    end.

dbg_format(File) ->
    {ok, Null} = file:open("/dev/null", [write]),
    Ref = make_ref(),
    Self = self(),
    Pid = dbg:trace_client(file, File, {fun(end_of_trace, _) -> Self ! Ref;
                                           (E, Io) -> io:format(Io, "~p~n", [E]), Io
                                        end, Null}),
    true = is_pid(Pid),
    receive Ref -> ok end.

%% {Label, Events, {ok, WallSeconds, CpuSeconds, PeakKb} | {error, Why}}
measure(Label, Events, Argv) ->
    Time = "/tmp/tracekit_cat_bench.time." ++ os:getpid(),
    Cmd = "/usr/bin/time -f '%e %U %S %M %x' -o " ++ Time ++ " "
        ++ lists:join(" ", [quote(A) || A <- Argv]) ++ " >/dev/null 2>&1; tail -1 " ++ Time,
    Out = string:trim(os:cmd(lists:flatten(Cmd))),
    _ = file:delete(Time),
    case string:lexemes(Out, " ") of
        [W, U, S, K, "0"] ->
            try {Label, Events, {ok, num(W), num(U) + num(S), list_to_integer(K)}}
            catch _:_ -> {Label, Events, {error, Out}}
            end;
        _ ->
            {Label, Events, {error, Out}}
    end.

num(S) ->
    try list_to_float(S) catch error:badarg -> float(list_to_integer(S)) end.

quote(S) -> "'" ++ S ++ "'".

%%% The workloads -----------------------------------------------------------

%% Rounds of a client and a server until N events are written (a round
%% is six events: send, receive, call, return, send, receive).
write_mixed(Path, N) ->
    {ok, F} = tracekit_file:new(#{path => Path, buffer => 16 bsl 20}),
    S = trace:session_create(cat_bench, {tracekit_file, F}, []),
    Server = spawn(fun server/0),
    Self = self(),
    Rounds = (N + 5) div 6,
    Client = spawn(fun() -> receive go -> ok end,
                            client(Server, Rounds),
                            Self ! {done, self()} end),
    1 = trace:process(S, Server, true, [send, 'receive', call, timestamp]),
    1 = trace:process(S, Client, true, [send, 'receive', timestamp]),
    1 = trace:function(S, {?MODULE, handle, 1}, [{'_', [], [{return_trace}]}], [local]),
    Client ! go,
    receive {done, Client} -> ok end,
    trace:session_destroy(S),
    exit(Server, kill),
    ok = tracekit_file:close(F),
    #{written := W} = tracekit_file:stats(F),
    W.

client(_Server, 0) ->
    ok;
client(Server, I) ->
    Server ! {req, self(), I, #{key => I rem 100, tags => [a, b]}},
    receive {resp, I, _} -> client(Server, I - 1) end.

server() ->
    receive
        {req, From, I, Req} -> From ! {resp, I, handle(Req)}, server()
    end.

handle(#{key := K, tags := T}) -> {ok, K * 2, length(T)}.

%% N send events of one process through dbg's file port.
write_dbg(Path, N) ->
    Sink = spawn(fun Loop() -> receive _ -> Loop() end end),
    Self = self(),
    P = spawn(fun() -> receive go -> ok end,
                       send_loop(Sink, N),
                       Self ! {done, self()} end),
    Port = (dbg:trace_port(file, Path))(),
    S = trace:session_create(cat_bench_dbg, Port, []),
    1 = trace:process(S, P, true, [send, timestamp]),
    P ! go,
    receive {done, P} -> ok end,
    trace:session_destroy(S),
    erlang:port_close(Port),
    exit(Sink, kill),
    N.

send_loop(_, 0) -> ok;
send_loop(To, N) -> To ! {msg, N}, send_loop(To, N - 1).
