%% @doc A flight recorder for ExUnit, as {@link tracekit_cth} is for
%% Common Test: it records each test and writes the trace of a failing one.
%%
%% ```
%% # test/test_helper.exs
%% ExUnit.start(formatters: [:tracekit_exunit])
%%
%% # in a test module
%% setup context, do: :tracekit_exunit.record(context)
%% '''
%%
%% Two parts work together. `:tracekit_exunit' is an ExUnit formatter
%% that stands in front of another (`ExUnit.CLIFormatter' unless
%% `formatter' says otherwise): it hands every event on to it, and before
%% it hands on the end of a failing test it writes that test's trace and
%% adds to the test's logs the line that names the files, which the
%% formatter prints under the failure. {@link record/1} (or {@link
%% record/2}), called in a `setup' of the test module, starts the
%% recording of the test: a trace of the test process in overwrite rings
%% (the last `events' events) that goes on when the test process exits,
%% started by the formatter's process (it ends with it). When the test
%% fails the formatter writes the events of the test body (from the call
%% of the test function to its return or exception, or the exit of the
%% test process) to `<dir>/<Module>.<test>.tracekit.txt', the HTML report
%% `.tracekit.html' and, with `messages' or `seq_trace', the Mermaid
%% diagrams `.tracekit.messages.mmd' and `.tracekit.seq.mmd', in Elixir
%% syntax. Passing tests leave nothing behind (`always: true' writes them
%% too). Nothing here fails a test: its own problems are printed.
%%
%% With no options it records the messages and process events of the test
%% process and, in tests that are not `async', the seq_trace flow it starts
%% (the node has one system seq tracer, which tests running at the same
%% time cannot share), and says so once when the suite starts. Options (a
%% map or keyword list, all optional): those of {@link tracekit_cth}
%% (`calls', `processes' with `test' for the test process, `messages',
%% `procs', `seq_trace', `events', `ring_size', `always', `depth',
%% `line_length', `nodes'), from three places, the nearest winning: the
%% formatter's (`ExUnit.start(formatters: [:tracekit_exunit], tracekit:
%% [calls: ["MyApp.Server.handle_call/3 -> return"]])'), the second
%% argument of {@link record/2}, and the test's tag `tracekit' (`@tag
%% tracekit: [calls: ...]', or `@tag tracekit: false' to record nothing).
%% The formatter's options also take `dir' (where the files go: by default
%% `tracekit' in the build directory of the Mix project, else in the
%% current directory; made private to the user when it is made) and
%% `formatter' (the formatter to hand the events to).
-module(tracekit_exunit).
-behaviour(gen_server).

-export([record/1, record/2]).
-export([init/1, handle_cast/2, handle_call/3, handle_info/2, terminate/2]).

-define(NAME, ?MODULE).
-define(KEYS, [calls, processes, messages, procs, seq_trace, events, ring_size, always,
               depth, line_length, nodes]).
-define(CALL_MS, 30000).

-record(st, {base :: map() | {error, string()},
             dir :: string(),
             formatter :: module(),
             fstate :: term(),
             %% {Module, Test} => the recording and what the test began with
             recs = #{} :: #{{atom(), atom()} => map()}}).

%%% The setup helper ----------------------------------------------------------

%% @equiv record(Context, #{})
-spec record(map()) -> ok.
record(Context) ->
    record(Context, #{}).

%% @doc Starts recording the test whose `setup' calls it (`Context' is the
%% test's context: its `module', `test', `async' and `tracekit' tag are
%% read), with `Opts' over the formatter's options. Returns `ok' (what a
%% `setup' may return) whatever happens: a recording that cannot start is
%% said on the standard error, and the test runs unrecorded.
-spec record(map(), map() | list()) -> ok.
record(#{module := Module, test := Test} = Context, Opts) when is_atom(Module), is_atom(Test) ->
    case whereis(?NAME) of
        undefined ->
            warn_once(no_formatter, "tracekit_exunit: the formatter is not running, so "
                      "nothing is recorded: start ExUnit with "
                      "formatters: [:tracekit_exunit]");
        Pid ->
            Tag = maps:get(tracekit, maps:get(tags, Context, Context), #{}),
            Async = maps:get(async, Context, false) =:= true,
            try gen_server:call(Pid, {record, {Module, Test}, self(), Async,
                                      [to_map(Opts), to_map(Tag)]}, ?CALL_MS) of
                {ok, Rec} ->
                    tracekit_case:seq_token(Rec);
                off ->
                    ok;
                {error, Why} ->
                    warn("tracekit_exunit: not recording ~ts: ~ts", [test_name(Module, Test), Why])
            catch
                exit:Why ->
                    warn("tracekit_exunit: not recording ~ts: the formatter did not answer "
                         "(~0tP)", [test_name(Module, Test), Why, 10])
            end
    end,
    ok;
record(Context, Opts) ->
    erlang:error(badarg, [Context, Opts]).

to_map(false) -> false;
to_map(M) when is_map(M) -> M;
to_map(L) when is_list(L) ->
    try maps:from_list(L)
    catch error:badarg -> {bad, L}
    end;
to_map(X) -> {bad, X}.

warn(Fmt, Args) ->
    io:format(standard_error, Fmt ++ "~n", Args).

warn_once(Key, Text) ->
    case persistent_term:get({?MODULE, Key}, false) of
        true -> ok;
        false -> persistent_term:put({?MODULE, Key}, true), warn("~ts", [Text])
    end.

%%% The formatter -------------------------------------------------------------

%% @private
init(ExOpts) ->
    Own = to_map(proplists:get_value(tracekit, ExOpts, #{})),
    Formatter = case Own of
                    #{formatter := F} when is_atom(F) -> F;
                    _ -> 'Elixir.ExUnit.CLIFormatter'
                end,
    Dir = case Own of
              #{dir := D} -> unicode:characters_to_list(D);
              _ -> default_dir()
          end,
    Base = case Own of
               {bad, X} -> {error, io_lib:format("options must be a map or a keyword list, "
                                                 "got ~0tP", [X, 10])};
               _ -> maps:without([formatter, dir], Own)
           end,
    register(?NAME, self()),
    process_flag(trap_exit, true),
    say_what(Base, Dir),
    {ok, FState} = Formatter:init(ExOpts),
    {ok, #st{base = Base, dir = Dir, formatter = Formatter, fstate = FState}}.

default_dir() ->
    case tracekit_ex:mix_build_path() of
        none -> filename:absname("tracekit");
        Build -> filename:join(Build, "tracekit")
    end.

say_what({error, Why}, _Dir) ->
    warn("tracekit_exunit: records nothing: ~ts", [Why]);
say_what(Base, Dir) ->
    case options(Base, [], false) of
        {ok, #{calls := Calls, messages := M, procs := P, events := N} = O} ->
            What = [W || {W, true} <- [{"messages", M}, {"process events", P}]],
            Parts = [["the ", lists:join(" and ", What), " of the test process"] || What =/= []]
                ++ [io_lib:format("the calls of ~ts", [calls_text(Calls)]) || Calls =/= []]
                ++ ["the seq_trace flow it starts (not in async tests)"
                    || maps:get(seq_trace, Base, true)],
            Where = case O of
                        #{nodes := Nodes} -> io_lib:format(" on this node and ~0tp", [Nodes]);
                        _ -> ""
                    end,
            io:format("tracekit_exunit records in each test whose setup calls "
                      ":tracekit_exunit.record/1 ~ts~ts (the last ~w events), and writes "
                      "them to ~ts when it fails~n",
                      [lists:join("; ", Parts), Where, N, Dir]);
        {error, Why} ->
            warn("tracekit_exunit: records nothing: ~ts", [Why])
    end.

calls_text(Calls) when is_list(Calls) ->
    case io_lib:printable_unicode_list(Calls) of
        true -> Calls;
        false -> lists:join(", ", [io_lib:format("~0tp", [C]) || C <- Calls])
    end;
calls_text(C) ->
    io_lib:format("~0tp", [C]).

%% The options of a test: the defaults, the layers in order; off for
%% false.
options(Base, Layers, Async) ->
    case lists:member(false, [Base | Layers]) of
        true ->
            off;
        false ->
            case [X || {bad, X} <- [Base | Layers]] of
                [Bad | _] ->
                    {error, io_lib:format("options must be a map or a keyword list, got ~0tP",
                                          [Bad, 10])};
                [] ->
                    O = lists:foldl(fun(L, Acc) -> maps:merge(Acc, L) end,
                                    #{processes => [test], seq_trace => not Async},
                                    [Base | Layers]),
                    case [K || K := _ <- O, not lists:member(K, ?KEYS)] of
                        [] -> tracekit_cth:check_options(O);
                        Unknown -> {error, io_lib:format("unknown options ~0tP (known: ~tw)",
                                                         [Unknown, 10, ?KEYS])}
                    end
            end
    end.

%% @private
handle_call({record, Key, TestPid, Async, Layers}, _From, #st{base = Base, recs = Recs} = St) ->
    Result = case Base of
                 {error, _} = E -> E;
                 _ -> start(Key, TestPid, options(Base, Layers, Async))
             end,
    case Result of
        {ok, Rec} -> {reply, {ok, maps:get(opts, Rec)}, St#st{recs = Recs#{Key => Rec}}};
        Other -> {reply, Other, St}
    end;
handle_call(_, _From, St) ->
    {reply, {error, unknown_request}, St}.

start(_Key, _TestPid, off) ->
    off;
start(_Key, _TestPid, {error, _} = E) ->
    E;
start({Module, Test}, TestPid, {ok, O}) ->
    Opts = O#{self_name => test, test_pid => TestPid, watch => true,
              syntax => case tracekit_ex:loaded() of true -> elixir; false -> erlang end},
    Mark = {Module, Test, 1},
    case tracekit_case:record(Opts, Mark) of
        nothing ->
            off;
        {ok, R} ->
            {ok, #{recorder => R, opts => Opts, tc_pid => TestPid, mark => Mark,
                   names => tracekit_case:start_names(Opts), module => Module, test => Test}};
        {error, Why} ->
            {error, io_lib:format("~0tp", [Why])}
    end.

%% @private
handle_cast({test_finished, Test} = Event, St) ->
    {Test1, St1} = finished(Test, St),
    forward(setelement(2, Event, Test1), St1);
handle_cast(Event, St) ->
    forward(Event, St).

forward(Event, #st{formatter = F, fstate = FS} = St) ->
    case F:handle_cast(Event, FS) of
        {noreply, FS1} -> {noreply, St#st{fstate = FS1}};
        {noreply, FS1, Extra} -> {noreply, St#st{fstate = FS1}, Extra};
        {stop, Why, FS1} -> {stop, Why, St#st{fstate = FS1}}
    end.

%% @private
handle_info({'EXIT', _, _}, St) ->
    {noreply, St};                              % the recordings' helpers
handle_info(Info, #st{formatter = F, fstate = FS} = St) ->
    case erlang:function_exported(F, handle_info, 2) of
        true ->
            case F:handle_info(Info, FS) of
                {noreply, FS1} -> {noreply, St#st{fstate = FS1}};
                {stop, Why, FS1} -> {stop, Why, St#st{fstate = FS1}}
            end;
        false ->
            {noreply, St}
    end.

%% @private
terminate(Why, #st{recs = Recs, formatter = F, fstate = FS}) ->
    _ = [tracekit:stop(R) || #{recorder := R} <- maps:values(Recs)],
    case erlang:function_exported(F, terminate, 2) of
        true -> F:terminate(Why, FS);
        false -> ok
    end.

%% The end of a test: its recording stopped, its files written when it
%% failed (or always), and the test given a line in its logs that names
%% them.
finished(#{module := Module, name := Name, state := State} = Test, #st{recs = Recs} = St) ->
    case maps:take({Module, Name}, Recs) of
        error ->
            {Test, St};
        {Rec, Recs1} ->
            St1 = St#st{recs = Recs1},
            Outcome = outcome(State),
            try write(Rec, Outcome, St1) of
                none -> {Test, St1};
                Line -> {add_log(Test, Line), St1}
            catch
                Class:Why:Stack ->
                    warn("tracekit_exunit: the trace of ~ts was not written: ~tp:~0tP ~0tP",
                         [test_name(Module, Name), Class, Why, 20, Stack, 20]),
                    {Test, St1}
            end
    end;
finished(Test, St) ->
    {Test, St}.

outcome(nil) -> passed;
outcome({failed, _}) -> failed;
outcome({invalid, _}) -> failed;
outcome(_) -> skipped.

write(#{recorder := R, opts := Opts, module := Module, test := Test} = Rec0, Outcome,
      #st{dir = Dir}) ->
    Summary = tracekit:stop(R),
    case {Summary, Outcome =:= failed orelse maps:get(always, Opts)} of
        {{ok, S}, true} ->
            Rec = maps:merge(Rec0, tracekit_case:recorded(S)),
            ok = private_dir(Dir),
            Base = filename:join(Dir, file_name(Module, Test) ++ ".tracekit"),
            {N, Files, Problems} =
                tracekit_case:write(Base, Rec#{title => test_name(Module, Test),
                                               records => Module}, Outcome),
            _ = [warn("tracekit_exunit: ~ts was not written: ~0tp", [F, Why])
                 || {F, Why} <- Problems],
            [{Txt, _} | More] = Files,
            unicode:characters_to_binary(
              io_lib:format("tracekit: ~w events of this test in ~ts (also ~ts)",
                            [N, Txt, lists:join(", ", [lists:nthtail(length(Base), F)
                                                       || {F, _} <- More])]));
        {{ok, _}, false} ->
            none;
        {{error, Why}, _} ->
            warn("tracekit_exunit: the recorder of ~ts was gone: ~0tp",
                 [test_name(Module, Test), Why]),
            none
    end.

add_log(#{logs := <<>>} = Test, Line) ->
    Test#{logs := Line};
add_log(#{logs := Logs} = Test, Line) when is_binary(Logs) ->
    Test#{logs := <<Logs/binary, "\n", Line/binary>>};
add_log(Test, Line) ->
    Test#{logs => Line}.

%% The directory of the files: made (mode 0700) when it is not there.
private_dir(Dir) ->
    case filelib:is_dir(Dir) of
        true ->
            ok;
        false ->
            ok = filelib:ensure_dir(Dir),
            case file:make_dir(Dir) of
                ok -> file:change_mode(Dir, 8#700);
                {error, eexist} -> ok
            end
    end.

%% "MyApp.ServerTest \"test gets a key\"" and a file name of it.
test_name(Module, Test) ->
    io_lib:format("~ts ~ts", [module_text(Module), io_lib:write_string(atom_to_list(Test))]).

module_text(M) ->
    case atom_to_list(M) of
        "Elixir." ++ Rest -> Rest;
        Other -> Other
    end.

file_name(Module, Test) ->
    Safe = [case C of
                _ when C >= $a, C =< $z; C >= $A, C =< $Z; C >= $0, C =< $9;
                       C =:= $.; C =:= $-; C =:= $_ -> C;
                _ -> $_
            end || C <- module_text(Module) ++ "." ++ atom_to_list(Test)],
    Short = lists:sublist(Safe, 150),
    case length(Safe) > 150 of
        true -> Short ++ "-" ++ integer_to_list(erlang:phash2(Safe));
        false -> Short
    end.
