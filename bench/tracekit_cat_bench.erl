%% @doc `make bench', tracekit-cat: the rate of `tracekit-cat --format
%% text' and `--format chrome' on a trace file of N send events (default
%% 10,000,000), events per second and peak memory, beside dbg's
%% trace_client and ttb's formatting of the same events written by dbg's
%% file port (those on the first million, their rate being per event).
%% Peak memory is /usr/bin/time's maximum resident set size of the whole
%% process (the VM's, for dbg and ttb).
-module(tracekit_cat_bench).

-export([main/1, write/3, dbg_format/1, ttb_format/1]).

main([Cat, Dir]) ->
    N = case os:getenv("TRACEKIT_CAT_BENCH_EVENTS") of
            false -> 10000000;
            S -> list_to_integer(S)
        end,
    Small = min(N, 1000000),
    ok = filelib:ensure_path(Dir),
    Tk = filename:join(Dir, "cat_bench.tkt"),
    TkSmall = filename:join(Dir, "cat_bench_small.tkt"),
    Dbg = filename:join(Dir, "cat_bench.dbg"),
    io:format("tracekit-cat: writing ~w send events (trace file), ~w (dbg's file port)~n",
              [N, Small]),
    Big = write(tracekit, Tk, N),
    Less = write(tracekit, TkSmall, Small),
    Ds = write(dbg, Dbg, Small),
    Rows = [measure("tracekit-cat --format text", Big, [Cat, Tk]),
            measure("tracekit-cat --format text", Less, [Cat, TkSmall]),
            measure("tracekit-cat --format chrome", Big, [Cat, "--format", "chrome", Tk]),
            measure("tracekit-cat --format dbg", Big, [Cat, "--format", "dbg", Tk]),
            measure("dbg:trace_client (printing)", Ds, vm(dbg_format, Dbg)),
            measure("ttb:format", Ds, vm(ttb_format, Dbg))],
    io:format("~-32s ~12s ~14s ~12s~n", ["", "events", "events/s", "peak MiB"]),
    [case R of
         {Label, Events, {ok, Secs, Kb}} ->
             io:format("~-32s ~12w ~14w ~12.1f~n",
                       [Label, Events, round(Events / max(Secs, 0.001)), Kb / 1024]);
         {Label, Events, {error, Why}} ->
             io:format("~-32s ~12w  failed: ~ts~n", [Label, Events, Why])
     end || R <- Rows],
    Rate = fun(L, E) -> hd([E0 / S || {L0, E0, {ok, S, _}} <- Rows, L0 =:= L, E0 =:= E] ++ [0]) end,
    DbgRate = Rate("dbg:trace_client (printing)", Ds),
    TextRate = Rate("tracekit-cat --format text", Big),
    io:format("tracekit-cat text: ~.1f x dbg:trace_client's rate (target 20)~n",
              [TextRate / max(DbgRate, 1)]),
    [file:delete(F) || F <- [Tk, TkSmall, Dbg]],
    ok.

%% A VM that formats the dbg file, its output thrown away.
vm(Fun, File) ->
    ["erl", "-noshell", "-pa", filename:dirname(code:which(?MODULE)),
     "-eval", "tracekit_cat_bench:" ++ atom_to_list(Fun) ++ "(\"" ++ File ++ "\"), halt()."].

dbg_format(File) ->
    {ok, Null} = file:open("/dev/null", [write]),
    Ref = make_ref(),
    Self = self(),
    Pid = dbg:trace_client(file, File, {fun(end_of_trace, _) -> Self ! Ref;
                                           (E, Io) -> io:format(Io, "~p~n", [E]), Io
                                        end, Null}),
    true = is_pid(Pid),
    receive Ref -> ok end.

ttb_format(File) ->
    {ok, Null} = file:open("/dev/null", [write]),
    ok = ttb:format(File, [{out, Null}]).

%% {Label, Events, {ok, Seconds, PeakKb} | {error, Why}}
measure(Label, Events, Argv) ->
    Cmd = "/usr/bin/time -f '%e %M %x' " ++ lists:join(" ", [quote(A) || A <- Argv])
        ++ " >/dev/null 2>/tmp/tracekit_cat_bench.time; tail -1 /tmp/tracekit_cat_bench.time",
    Out = string:trim(os:cmd(lists:flatten(Cmd))),
    case string:lexemes(Out, " ") of
        [S, K, "0"] ->
            try {Label, Events, {ok, list_to_float(S), list_to_integer(K)}}
            catch _:_ -> {Label, Events, {error, Out}}
            end;
        _ ->
            {Label, Events, {error, Out}}
    end.

quote(S) -> "'" ++ S ++ "'".

%% N send events of one process, traced by tracekit_file or dbg's file port.
write(Kind, Path, N) ->
    Sink = spawn(fun Loop() -> receive _ -> Loop() end end),
    Self = self(),
    P = spawn(fun() -> receive go -> ok end,
                       send_loop(Sink, N),
                       Self ! {done, self()} end),
    Stop = case Kind of
               tracekit ->
                   {ok, F} = tracekit_file:new(#{path => Path, buffer => 16 bsl 20}),
                   S = trace:session_create(cat_bench, {tracekit_file, F}, []),
                   1 = trace:process(S, P, true, [send, timestamp]),
                   fun() ->
                           trace:session_destroy(S),
                           ok = tracekit_file:close(F),
                           #{written := W} = tracekit_file:stats(F),
                           W
                   end;
               dbg ->
                   Port = (dbg:trace_port(file, Path))(),
                   S = trace:session_create(cat_bench_dbg, Port, []),
                   1 = trace:process(S, P, true, [send, timestamp]),
                   fun() -> trace:session_destroy(S), erlang:port_close(Port), N end
           end,
    P ! go,
    receive {done, P} -> ok end,
    Written = Stop(),
    exit(Sink, kill),
    Written.

send_loop(_, 0) -> ok;
send_loop(To, N) -> To ! {msg, N}, send_loop(To, N - 1).
