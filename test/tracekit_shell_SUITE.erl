%% tracekit in a real interactive shell: a node started with a terminal
%% (`erl' under script(1), which gives it a pseudo-terminal), driven by
%% typing into it. tracekit prints through the shell's group leader,
%% user_drv and its writer: tracing those would trace its own printing.
-module(tracekit_shell_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, init_per_suite/1, end_per_suite/1]).
-export([messages_of_all_leave_out_the_printing_path/1,
         calls_in_prim_tty_leave_out_the_printing_path/1,
         colours_in_a_terminal/1]).

all() ->
    [messages_of_all_leave_out_the_printing_path,
     calls_in_prim_tty_leave_out_the_printing_path,
     colours_in_a_terminal].

init_per_suite(Config) ->
    case {os:find_executable("script"), os:find_executable("erl")} of
        {false, _} -> {skip, "script(1) is needed to give a node a terminal"};
        {_, false} -> {skip, "erl is not on PATH"};
        {Script, Erl} -> [{script, Script}, {erl, Erl} | Config]
    end.

end_per_suite(_Config) ->
    ok.

%% Every process traced, while two processes exchange five pings: the
%% trace shows the pings, no event of a process on the way from
%% io:put_chars to the terminal, and nothing dropped (no feedback).
messages_of_all_leave_out_the_printing_path(Config) ->
    Out = shell_session(Config,
                        ["{ok, _} = tracekit:messages(all, #{max_time => 1500, max_events => 300}), "
                         "Pong = spawn(fun L() -> receive {F, N} -> F ! {tk_pong, N}, L() end end), "
                         "[begin Pong ! {self(), {tk_ping, I}}, receive {tk_pong, _} -> ok end, "
                         "timer:sleep(50) end || I <- lists:seq(1, 5)], ok."]),
    {Events, Summary, Path} = parse(Out),
    ?assertEqual(10, length([L || {_, L} <- Events, contains(L, "<< {tk_pong,{tk_ping,")
                                                        orelse contains(L, "! {tk_pong,{tk_ping,")])),
    ?assertEqual([], [E || {P, _} = E <- Events, lists:member(P, Path)]),
    ?assertMatch({match, _}, re:run(Summary, "0 dropped; stopped at the time limit of 1500 ms")).

%% Every call of a prim_tty function in every process: the one made by
%% the shell's evaluator is shown, none of the terminal's own.
calls_in_prim_tty_leave_out_the_printing_path(Config) ->
    Out = shell_session(Config,
                        ["{ok, _} = tracekit:calls(\"prim_tty\", #{max_time => 1500, max_events => 300}), "
                         "prim_tty:npwcwidth($a), io:format(\"~s~n\", [\"tk_printed\"])."]),
    {Events, Summary, Path} = parse(Out),
    ?assertMatch([_ | _], [L || {_, L} <- Events, contains(L, "prim_tty:npwcwidth(97)")]),
    ?assertEqual([], [E || {P, _} = E <- Events, lists:member(P, Path)]),
    ?assertMatch({match, _}, re:run(Summary, "0 dropped; stopped at the time limit of 1500 ms")).

%% In a terminal the lines have colours (and the same text without
%% them); with colour => false they have none.
colours_in_a_terminal(Config) ->
    Raw = shell_output(Config,
                       ["{ok, T1} = tracekit:calls(\"lists:seq(1077, _) -> return\", "
                        "#{max_events => 2}), lists:seq(1077, 1078), {ok, _} = tracekit:wait(T1), "
                        "{ok, T2} = tracekit:calls(\"lists:seq(1079, _)\", "
                        "#{max_events => 1, colour => false}), lists:seq(1079, 1080), "
                        "tracekit:wait(T2)."]),
    %% The lines of the events, from their time on (the shell redraws
    %% its prompt before them).
    Events = [Rest || L <- string:split(unicode:characters_to_list(Raw), "\n", all),
                      {match, [Rest]} <- [re:run(L, "[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} (.*lists:seq.*)\r$",
                                                 [{capture, all_but_first, list}, unicode])]],
    ct:log("~p", [Events]),
    ?assertMatch([_, _, _], Events),
    [Call, Return, Plain] = Events,
    ?assertMatch({match, _}, re:run(Call, "^\e\\[36m<[0-9.]+>\e\\[0m \e\\[1mlists:seq\e\\[0m\\(1077, 1078\\)$")),
    ?assertMatch({match, _}, re:run(Return, "^\e\\[36m<[0-9.]+>\e\\[0m \e\\[32mlists:seq/2 ->\e\\[0m \\[1077,1078\\]$")),
    ?assertMatch({match, _}, re:run(Plain, "^<[0-9.]+> lists:seq\\(1079, 1080\\)$")).

%%% The terminal -------------------------------------------------------------

%% Starts erl with a terminal, types each command and waits for the end
%% of its trace, then has the shell print the processes of its printing
%% path; returns all that the terminal showed, as lines without escape
%% sequences.
shell_session(Config, Commands) ->
    Out = shell_output(Config, Commands),
    [strip(L) || L <- string:split(unicode:characters_to_list(Out), "\n", all)].

%% All that the terminal showed, escape sequences and all.
shell_output(Config, Commands) ->
    Ebin = filename:dirname(code:which(tracekit)),
    Cmd = lists:flatten(io_lib:format("~ts -pa ~ts", [?config(erl, Config), Ebin])),
    Port = open_port({spawn_executable, ?config(script, Config)},
                     [{args, ["-qfc", Cmd, "/dev/null"]}, {env, [{"TERM", "xterm"}]},
                      binary, stream, exit_status, use_stdio, stderr_to_stdout]),
    try
        Out0 = await(Port, <<>>, "1> "),
        Out1 = lists:foldl(fun(C, Acc) ->
                                   type(Port, C),
                                   await(Port, Acc, "tracekit: [0-9]+ events? shown")
                           end, Out0, Commands),
        type(Port, "io:format(\"PATH ~w~n\", [[P || P <- [group_leader() | [whereis(N) "
             "|| N <- [user_drv, user_drv_writer, user_drv_reader, user, standard_error, "
             "standard_error_writer]]], is_pid(P)]]), halt()."),
        Out = closed(Port, await(Port, Out1, "PATH \\[<")),
        ct:log("~ts", [Out]),
        Out
    after
        close(Port)
    end.

close(Port) ->
    try port_close(Port)
    catch error:badarg -> true                  % closed already
    end.

type(Port, Line) ->
    true = port_command(Port, [Line, $\n]).

%% Reads the terminal until Re matches what it showed (within 20 s).
await(Port, Acc, Re) ->
    case re:run(strip(unicode:characters_to_list(Acc)), Re) of
        {match, _} ->
            Acc;
        nomatch ->
            receive
                {Port, {data, Data}} -> await(Port, <<Acc/binary, Data/binary>>, Re);
                {Port, {exit_status, S}} -> ct:fail({terminal_exited, S, Acc})
            after 20000 ->
                    ct:fail({no_output_matching, Re, Acc})
            end
    end.

%% Reads the rest, until the node halts.
closed(Port, Acc) ->
    receive
        {Port, {data, Data}} -> closed(Port, <<Acc/binary, Data/binary>>);
        {Port, {exit_status, _}} -> Acc
    after 20000 ->
            ct:fail({did_not_halt, Acc})
    end.

strip(Text) ->
    re:replace(Text, "\e\\[[0-9;?]*[A-Za-z]|\e[()][A-Z0-9]|\e[=>]|\r", "", [global, {return, list}, unicode]).

%% The event lines as {Pid, Line} (the pid whose event it is), the summary
%% line and the pids of the printing path.
parse(Lines) ->
    Events = [{Pid, L} || L <- Lines,
                          {match, [Pid]} <- [re:run(L, "[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} (<[0-9.]+>)",
                                                    [{capture, all_but_first, list}])]],
    [Summary | _] = [L || L <- Lines, re:run(L, "tracekit: [0-9]+ events? shown") =/= nomatch],
    [PathText | _] = [P || L <- Lines, {match, [P]} <- [re:run(L, "PATH (\\[<[^]]*\\])",
                                                                [{capture, all_but_first, list}])]],
    {match, Path} = re:run(PathText, "<[0-9.]+>", [global, {capture, all, list}]),
    ?assert(length(Path) >= 6),
    {Events, Summary, lists:append(Path)}.

contains(Text, Part) ->
    string:find(Text, Part) =/= nomatch.
