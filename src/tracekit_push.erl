%% @private
%% @doc tracekit lent to a node that does not have it: a trace of several
%% nodes (or the shell of a release that did not include tracekit, used
%% through a remote console) pushes tracekit's modules and NIF libraries
%% to a node whose code path lacks them, as redbug pushes its target
%% module. The libraries are built for this node's release, so the node
%% must run the same OTP release on the same system architecture; else
%% the trace is refused with the reason.
%%
%% On the node: the NIF libraries are written into a directory that only
%% its user can enter, made in its temporary directory, and the modules
%% are loaded from binaries as if they lived beside it (so each module
%% finds its library there). A process of tracekit's, started there,
%% watches the trace: when the trace's process ends, or the connection to
%% it is lost, and no process of the node still runs tracekit's code, it
%% deletes the directory and unloads every module it pushed (deleted and
%% purged), and the node is as it was.
-module(tracekit_push).

-export([push/2, watch/3]).

%% How often the watcher looks for processes still running tracekit's
%% code once the trace is gone, and for how long at most.
-define(POLL_MS, 100).
-define(WAIT_MS, 90000).
-define(CALL_MS, 10000).

%% @doc Pushes tracekit to node `Node', for the trace `Trace' (a process
%% of this node): `ok', or `{error, Why}' with Why a sentence.
-spec push(node(), pid()) -> ok | {error, string()}.
push(Node, Trace) ->
    try
        ok = same_system(Node),
        Dir = private_dir(Node),
        ok = erpc:call(Node, file, make_dir, [filename:join(Dir, "priv")], ?CALL_MS),
        _ = [ok = erpc:call(Node, file, write_file, [filename:join([Dir, "priv", Name]), Bin],
                            ?CALL_MS)
             || {Name, Bin} <- libraries()],
        Mods = modules(),
        %% Ours first, the one every library's loading asks for its path.
        Ordered = [tracekit_nif | lists:delete(tracekit_nif, Mods)],
        _ = [load(Node, Dir, M) || M <- Ordered],
        {ok, _} = erpc:call(Node, ?MODULE, watch, [Trace, Mods, Dir], ?CALL_MS),
        ok
    catch
        throw:{push, Why} -> {error, Why};
        Class:Reason -> {error, text("tracekit could not be loaded there: ~w:~0tP",
                                     [Class, Reason, 10])}
    end.

%% The libraries are this node's: the other node must run the same
%% release on the same system.
same_system(Node) ->
    Facts = fun(N) ->
                    [erpc:call(N, erlang, system_info, [K], ?CALL_MS)
                     || K <- [otp_release, system_architecture, nif_version, wordsize]]
            end,
    case {Facts(Node), Facts(node())} of
        {Same, Same} ->
            ok;
        {[Rel, Arch | _], [MyRel, MyArch | _]} ->
            throw({push, text("tracekit is not loaded there, and it cannot be lent: it runs "
                              "OTP ~ts on ~ts, this node OTP ~ts on ~ts (tracekit's libraries "
                              "are built for one release and system); install tracekit in "
                              "that node's release", [Rel, Arch, MyRel, MyArch])})
    end.

%% A directory of the node's temporary directory that only its user can
%% enter (its name said by the node's OS process id, for the sweep of
%% tracekit_private).
private_dir(Node) ->
    Temp = case erpc:call(Node, os, getenv, ["TMPDIR"], ?CALL_MS) of
               T when is_list(T), T =/= "" -> T;
               _ -> "/tmp"
           end,
    OsPid = erpc:call(Node, os, getpid, [], ?CALL_MS),
    Dir = filename:join(Temp, "tracekit-" ++ atom_to_list(Node) ++ "-" ++ OsPid ++ "-code"
                        ++ integer_to_list(erlang:unique_integer([positive]))
                        ++ [lists:nth(1 + B rem 26, "abcdefghijklmnopqrstuvwxyz")
                            || <<B>> <= crypto:strong_rand_bytes(10)]),
    case erpc:call(Node, file, make_dir, [Dir], ?CALL_MS) of
        ok ->
            ok = erpc:call(Node, file, change_mode, [Dir, 8#700], ?CALL_MS),
            Dir;
        {error, Posix} ->
            throw({push, text("tracekit is not loaded there, and it cannot be lent: no "
                              "private directory in ~ts (~w)", [Temp, Posix])})
    end.

libraries() ->
    Priv = tracekit_nif:priv_dir(),
    [{filename:basename(F), Bin}
     || F <- filelib:wildcard(filename:join(Priv, "*.so")), {ok, Bin} <- [file:read_file(F)]].

%% Every module of tracekit (those of its application, or of the
%% directory its beams were loaded from).
modules() ->
    Ebin = filename:dirname(code:which(?MODULE)),
    lists:usort([list_to_atom(filename:basename(F, ".beam"))
                 || F <- filelib:wildcard(filename:join(Ebin, "tracekit*.beam"))]).

load(Node, Dir, M) ->
    {M, Bin, _} = code:get_object_code(M),
    Beam = filename:join([Dir, "ebin", atom_to_list(M) ++ ".beam"]),
    case erpc:call(Node, code, load_binary, [M, Beam, Bin], ?CALL_MS) of
        {module, M} -> ok;
        {error, Why} -> throw({push, text("tracekit's module ~w could not be loaded there: "
                                          "~0tP", [M, Why, 10])})
    end.

text(Fmt, Args) -> lists:flatten(io_lib:format(Fmt, Args)).

%%% On the node ------------------------------------------------------------------

%% @doc (On the node the modules were pushed to.) Starts the process that
%% unloads them and deletes `Dir' once the trace `Trace' is gone and no
%% process runs their code.
-spec watch(pid(), [module()], file:filename()) -> {ok, pid()}.
watch(Trace, Mods, Dir) ->
    Pid = spawn(fun() ->
                        Mon = monitor(process, Trace),
                        receive {'DOWN', Mon, process, Trace, _} -> ok end,
                        Until = erlang:monotonic_time(millisecond) + ?WAIT_MS,
                        unused(Mods, Until),
                        unload(Mods, Dir)
                end),
    ok = tracekit_own:mark([Pid]),
    {ok, Pid}.

%% Until no process but this one runs the modules' code (the agents have
%% ended: a disconnected one keeps its file a while).
unused(Mods, Until) ->
    Self = self(),
    Busy = [P || P <- processes(), P =/= Self,
                 {current_function, {M, _, _}} <- [erlang:process_info(P, current_function)],
                 lists:member(M, Mods)],
    case Busy =/= [] andalso erlang:monotonic_time(millisecond) < Until of
        true -> receive after ?POLL_MS -> unused(Mods, Until) end;
        false -> ok
    end.

%% The directory deleted, every module unloaded; this module's own old
%% code is purged by a process of the code server's module once this one
%% has ended.
unload(Mods, Dir) ->
    _ = file:del_dir_r(Dir),
    _ = [begin
             _ = code:purge(M),
             _ = code:delete(M),
             code:purge(M)
         end || M <- Mods, M =/= ?MODULE],
    _ = code:delete(?MODULE),
    _ = spawn(code, purge, [?MODULE]),
    ok.
