%% @private
%% @doc The lines a trace prints: one per event (by the user's format fun
%% or tracekit_format's, with registered names learnt along the way and,
%% in a trace of several nodes, the node first), and the io request that
%% prints them, with a time limit.
%%
%% What the lines need to know as the trace goes on is the printer's
%% state: the names, the record definitions of the modules the trace
%% touched (read once each, on this node), and the tags given to
%% references.
-module(tracekit_printer).

-export([new/2, line/4, put_chars/3, add_names/2, colour/1, processes/1, io_pid/1,
         format_ms/0]).

-type names() :: #{pid() => atom()}.
-opaque state() :: #{names := names(),
                     records := tracekit_records:cache() | false,
                     refs := tracekit_format:ref_table() | false,
                     colour := boolean(),
                     stacks := pos_integer(),
                     formatter := pid() | undefined}.
-export_type([names/0, state/0]).

%% How long an io device may take to say whether it is a terminal.
-define(GETOPTS_MS, 1000).
%% How long the user's format fun may take for a line.
-define(FORMAT_MS, 5000).
%% The most modules whose records a trace reads.
-define(RECORD_MODULES, 200).

%% @doc The state of a new trace's printer, from tracekit's options
%% (`records', `short_refs', `colour', `stack_depth', `io'; all
%% optional) and the modules whose records are read now, before tracing
%% starts. With `records => false' no records are read; `records =>
%% [Module]' reads those modules too (loading them). `colour => auto'
%% (the default) asks the io device whether it writes to a terminal.
%% With `format', the fun runs in a process of its own (see {@link
%% processes/1}), so that a fun that does not return cannot hold the
%% trace.
-spec new(map(), [module()]) -> state().
new(Opts, Modules) ->
    Records = case maps:get(records, Opts, false) of
                  false ->
                      false;
                  More ->
                      %% tracekit_records reads no more modules than
                      %% that into a cache: the others are not loaded.
                      Extra = case More of
                                  true -> [];
                                  L when is_list(L) -> lists:sublist(lists:usort(L), ?RECORD_MODULES)
                              end,
                      _ = [code:ensure_loaded(M) || M <- [beam_lib | Extra]],
                      tracekit_records:new(lists:usort(Modules ++ Extra))
              end,
    State = #{names => #{}, records => Records,
              refs => case maps:get(short_refs, Opts, false) of
                          true -> tracekit_format:new_ref_table();
                          false -> false
                      end,
              colour => colour(Opts),
              stacks => maps:get(stack_depth, Opts, 8),
              formatter => case Opts of
                               #{format := Fun} when is_function(Fun, 1) -> formatter(Fun);
                               #{} -> undefined
                           end},
    %% The code that prints a line is loaded now, so that the code
    %% server's work for the first line is not traced.
    _ = line({trace_ts, self(), call, {?MODULE, new, [{x, make_ref()}]}, {caller, {?MODULE, new, 2}},
              os:timestamp()}, undefined, maps:with([depth, line_length], Opts), State),
    State.

%% @doc The processes of the printer (the one that runs the format fun),
%% to be left untraced.
-spec processes(state()) -> [pid()].
processes(#{formatter := F}) when is_pid(F) -> [F];
processes(#{}) -> [].

%% A process that runs Fun for each event it is sent, as long as the
%% process that made it lives.
formatter(Fun) ->
    Owner = self(),
    spawn(fun() ->
                  Mon = monitor(process, Owner),
                  formatter_loop(Fun, Owner, Mon)
          end).

formatter_loop(Fun, Owner, Mon) ->
    receive
        {format, Ref, E} ->
            Owner ! {Ref, line(Fun, E)},
            formatter_loop(Fun, Owner, Mon);
        {'DOWN', Mon, process, Owner, _} ->
            ok
    end.

%% The line of the format fun, or timeout (the fun's process is then
%% ended).
format_line(Formatter, E) ->
    Mon = monitor(process, Formatter),
    Formatter ! {format, Mon, E},
    receive
        {Mon, Line} ->
            demonitor(Mon, [flush]),
            Line;
        {'DOWN', Mon, process, Formatter, Why} ->
            format_failed(E, io_lib:format("its process exited: ~0tP", [Why, 10]))
    after ?FORMAT_MS ->
            demonitor(Mon, [flush]),
            exit(Formatter, kill),
            timeout
    end.

%% @doc How long the user's format fun may take for a line.
-spec format_ms() -> pos_integer().
format_ms() ->
    ?FORMAT_MS.

%% @doc Adds names (learnt elsewhere: from the agents of a cluster trace).
-spec add_names(names(), state()) -> state().
add_names(More, #{names := Names} = State) ->
    State#{names := maps:merge(Names, More)}.

%% @doc Whether the lines get colours: `colour' true, or `auto' (the
%% default) when the io device writes to a terminal, the terminal is not
%% `dumb' and `NO_COLOR' is not set.
-spec colour(map()) -> boolean().
colour(#{colour := C}) when is_boolean(C) ->
    C;
colour(Opts) ->
    case maps:get(colour, Opts, auto) of
        auto ->
            os:getenv("TERM") =/= "dumb" andalso os:getenv("NO_COLOR", "") =:= ""
                andalso terminal(maps:get(io, Opts, standard_io));
        _ ->
            false
    end.

%% Whether an io device writes to a terminal (the shell's standard_io
%% does; a file or a capture does not), asked with a time limit.
terminal(Io) ->
    case io_pid(Io) of
        Pid when is_pid(Pid) ->
            Mon = monitor(process, Pid),
            Pid ! {io_request, self(), Mon, getopts},
            receive
                {io_reply, Mon, Reply} ->
                    demonitor(Mon, [flush]),
                    is_list(Reply) andalso lists:member({stdout, true}, Reply)
                        andalso lists:member({terminal, true}, Reply);
                {'DOWN', Mon, process, Pid, _} ->
                    false
            after ?GETOPTS_MS ->
                    demonitor(Mon, [flush]),
                    false
            end;
        undefined ->
            false
    end.

%% @doc The line of event `E' of `Node' (`undefined': a trace of one
%% node, no node shown), and the state after it. A format fun that
%% fails, or returns what is not text, gives a line that says so: the
%% trace goes on. A format fun that does not return within 5 seconds
%% gives `timeout' (its process is ended, and no line is formatted with
%% it again).
-spec line(tuple(), node() | undefined, map(), state()) ->
          {unicode:chardata() | timeout, state()}.
line(E, Node, #{format := Fun}, #{formatter := F} = State) when is_function(Fun, 1) ->
    case F of
        undefined ->
            {timeout, State};
        _ ->
            case format_line(F, E) of
                timeout -> {timeout, State#{formatter := undefined}};
                Line -> {[node_prefix(Node), Line], State}
            end
    end;
line(E, Node, Opts, #{names := Names0, records := Records0, refs := Refs0} = State) ->
    Names = learn_names(E, Names0),
    FOpts0 = (maps:with([depth, line_length], Opts))#{names => Names,
                                                      colour => maps:get(colour, State),
                                                      stacks => maps:get(stacks, State)},
    {Records, FOpts1} = case Records0 of
                            false ->
                                {false, FOpts0};
                            _ ->
                                R = tracekit_records:learn(E, Records0),
                                {R, FOpts0#{records => tracekit_records:defs(R)}}
                        end,
    {Refs, FOpts} = case Refs0 of
                        false ->
                            {false, FOpts1};
                        _ ->
                            T = tracekit_format:tag_refs(E, Refs0),
                            {T, FOpts1#{refs => tracekit_format:ref_tags(T)}}
                    end,
    {[node_prefix(Node), line(fun(Ev) -> tracekit_format:event(Ev, FOpts) end, E)],
     State#{names := Names, records := Records, refs := Refs}}.

node_prefix(undefined) -> "";
node_prefix(Node) -> [atom_to_list(Node), " "].

line(Fun, E) ->
    try Fun(E) of
        Line ->
            case text(Line) of
                {ok, Text} -> Text;
                error -> format_failed(E, io_lib:format("it returned ~0tP, which is "
                                                        "not text", [Line, 10]))
            end
    catch
        Class:Reason ->
            format_failed(E, io_lib:format("~tw:~0tP", [Class, Reason, 10]))
    end.

text(Line) ->
    try unicode:characters_to_list(Line) of
        Text when is_list(Text) -> {ok, Text};
        _ -> error
    catch
        error:badarg -> error
    end.

format_failed(E, Why) ->
    io_lib:format("tracekit: cannot format the event ~0tP: ~ts", [E, 10, Why]).

%% @doc io:put_chars/2 with a time limit (the io protocol's request): `ok',
%% or `timeout' when the device did not answer within `Ms'. A device that
%% is gone takes nothing, as io:put_chars/2 would fail.
-spec put_chars(io:device(), unicode:chardata(), timeout()) -> ok | timeout.
put_chars(Io, Chars, Ms) ->
    case io_pid(Io) of
        Pid when is_pid(Pid) ->
            Mon = monitor(process, Pid),
            Pid ! {io_request, self(), Mon, {put_chars, unicode, Chars}},
            receive
                {io_reply, Mon, _} -> demonitor(Mon, [flush]), ok;
                {'DOWN', Mon, process, Pid, _} -> ok
            after Ms ->
                    demonitor(Mon, [flush]),
                    timeout
            end;
        undefined ->
            ok
    end.

%% Registered names of the processes an event mentions.
learn_names(E, Names) ->
    case E of
        {_, P, register, Name} -> Names#{P => Name};
        {_, P, register, Name, _} -> Names#{P => Name};
        _ -> lists:foldl(fun name/2, Names, pids(E))
    end.

pids(E) ->
    [X || X <- lists:sublist(tuple_to_list(E), 2, 4), is_pid(X)].

%% A name is looked up each time (processes register and unregister);
%% the last one known is kept for processes that have exited. Names of
%% other nodes' processes come from their register events only.
name(P, Names) when node(P) =:= node() ->
    case erlang:process_info(P, registered_name) of
        {registered_name, N} -> Names#{P => N};
        [] -> maps:remove(P, Names);
        undefined -> Names
    end;
name(_P, Names) ->
    Names.

%% @doc The process of an io device: `standard_io' is the group leader.
-spec io_pid(io:device()) -> pid() | undefined.
io_pid(standard_io) -> group_leader();
io_pid(Name) when is_atom(Name) -> whereis(Name);
io_pid(Pid) when is_pid(Pid) -> Pid;
io_pid(_) -> undefined.
