%% @private
%% @doc The lines a trace prints: one per event (by the user's format fun
%% or tracekit_format's, with registered names learnt along the way and,
%% in a trace of several nodes, the node first), and the io request that
%% prints them, with a time limit.
-module(tracekit_printer).

-export([line/4, put_chars/3]).

-type names() :: #{pid() => atom()}.
-export_type([names/0]).

%% @doc The line of event `E' of `Node' (`undefined': a trace of one
%% node, no node shown), and the names known after it. A format fun that
%% fails, or returns what is not text, gives a line that says so: the
%% trace goes on.
-spec line(tuple(), node() | undefined, map(), names()) -> {unicode:chardata(), names()}.
line(E, Node, #{format := Fun}, Names) when is_function(Fun, 1) ->
    {[node_prefix(Node), line(Fun, E)], Names};
line(E, Node, Opts, Names0) ->
    Names = learn_names(E, Names0),
    FOpts = (maps:with([depth, line_length], Opts))#{names => Names},
    {[node_prefix(Node), line(fun(Ev) -> tracekit_format:event(Ev, FOpts) end, E)], Names}.

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
    case tracekit_setup:io_pid(Io) of
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
