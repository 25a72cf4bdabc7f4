%% @private
%% @doc Private directories and files: trace files and what is made of
%% them hold message contents, so the files an agent writes in a shared
%% temporary directory, and the files fetched from other nodes, are made
%% in a directory that only this user can enter (mode 0700, an
%% unpredictable name), and the directory is deleted with them; an export,
%% a report or a test case's files are written there too and then renamed
%% to the name asked for ({@link open_output/1}).
%%
%% A directory's name is `Prefix', this VM's OS process id, a dash and
%% random characters: the directories that a VM left when it stopped while
%% tracing are found by {@link sweep/2} once a VM of the same node name
%% runs tracekit again.
-module(tracekit_private).

-export([temp_dir/0, dir/2, delete_dir/1, sweep/2, move_in/2, open_output/1, write_file/2]).

-include_lib("kernel/include/file.hrl").

%% @doc The system's directory for temporary files: `TMPDIR', or /tmp.
-spec temp_dir() -> file:filename_all().
temp_dir() ->
    case os:getenv("TMPDIR") of
        Dir when is_list(Dir), Dir =/= "" -> Dir;
        _ -> "/tmp"
    end.

%% @doc Makes a new directory in `Parent', named `Prefix' followed by this
%% VM's OS process id, a dash and random characters, that only this user
%% can enter: `{ok, Dir}' or `{error, Posix}'. It is made as every private
%% directory of tracekit is, by {@link tracekit_file:private_dir/2} (as
%% `mkdtemp' makes one: made new by `mkdir', mode 0700 from the start, 12
%% characters from the kernel's random source).
-spec dir(file:filename_all(), string()) -> {ok, file:filename_all()} | {error, atom()}.
dir(Parent, Prefix) ->
    tracekit_file:private_dir(Parent, Prefix ++ os:getpid() ++ "-").

%% @doc Deletes a private directory and what it holds (links are deleted,
%% never followed).
-spec delete_dir(file:filename_all()) -> ok.
delete_dir(Dir) ->
    _ = file:del_dir_r(Dir),
    ok.

%% @doc Puts the file `From' (in a private directory) at `To', which must
%% not exist: the file is never seen at `To' with other permissions than
%% its own (0600) nor half written.
-spec move_in(file:filename_all(), file:filename_all()) -> ok | {error, atom()}.
move_in(From, To) ->
    %% A link makes the name exclusively (it fails when To exists, and
    %% never follows a link planted there); the private name then goes.
    case file:make_link(From, To) of
        ok -> _ = file:delete(From), ok;
        {error, _} = E -> E
    end.

%% The prefix of the private directory an output is written in.
-define(OUTPUT_PREFIX, ".tracekit-out-").

%% @doc Opens `Path' to be written: `{ok, Fd, Done}', where `Fd' is a raw
%% file and `Done(ok)' puts what was written at `Path', `Done(abort)'
%% forgets it. The file is made in a private directory beside `Path' with
%% mode 0600 and renamed to `Path' when done: it is never written through
%% a link planted at `Path' (a link there is replaced, not followed), never
%% readable by others, and never seen half written. `Path' may name an
%% existing regular file or link (replaced), nothing else. The private
%% directory goes with the calling process: if it exits before `Done' is
%% called (an export killed part way), the directory and what was written
%% are deleted.
-spec open_output(file:filename_all()) ->
          {ok, file:fd(), fun((ok | abort) -> ok | {error, atom()})} | {error, atom()}.
open_output(Path) ->
    case name(Path) of
        {ok, Name} -> open_output1(Name);
        error -> {error, badarg}
    end.

%% A file name as file:name_all() is, flattened; error for any other term,
%% and for an empty name.
name(<<>>) -> error;
name(Path) when is_binary(Path) -> {ok, Path};
name(Path) when is_atom(Path); is_list(Path) ->
    try filename:flatten(Path) of
        [] -> error;
        Flat when is_list(Flat) ->
            case lists:all(fun(C) -> is_integer(C) andalso C >= 0 end, Flat) of
                true -> {ok, Flat};
                false -> error
            end
    catch
        error:_ -> error
    end;
name(_) ->
    error.

open_output1(Path) ->
    Parent = filename:dirname(Path),
    maybe
        ok ?= replaceable(Path),
        sweep(Parent, ?OUTPUT_PREFIX),
        {ok, Dir, Keeper} ?= kept_dir(Parent, ?OUTPUT_PREFIX),
        Tmp = filename:join(Dir, "output"),
        {ok, Fd} ?= private_open(Tmp, Dir, Keeper),
        {ok, Fd, fun(ok) ->
                         Closed = file:close(Fd),
                         Moved = case Closed of
                                     ok -> file:rename(Tmp, Path);
                                     _ -> Closed
                                 end,
                         release(Dir, Keeper),
                         Moved;
                    (abort) ->
                         _ = file:close(Fd),
                         release(Dir, Keeper)
                 end}
    end.

private_open(Tmp, Dir, Keeper) ->
    case file:open(Tmp, [write, raw, binary, exclusive]) of
        {ok, Fd} ->
            case file:change_mode(Tmp, 8#600) of
                ok -> {ok, Fd};
                {error, _} = E -> _ = file:close(Fd), release(Dir, Keeper), E
            end;
        {error, _} = E ->
            release(Dir, Keeper),
            E
    end.

%% A private directory that goes with the calling process: it is made by
%% a keeper process that watches the caller and deletes the directory if
%% the caller exits before release/2 (which deletes it and lets the keeper
%% go). The keeper makes it, so that no moment of the caller's leaves a
%% directory that nobody deletes.
kept_dir(Parent, Prefix) ->
    Owner = self(),
    Ref = make_ref(),
    %% A trace of all processes traces the keeper from its first call:
    %% it waits, making none, until it is out of every tracekit session
    %% (its calls would be events of those traces, and a slow trace whose
    %% spec it calls would keep them, write them, make another keeper...).
    {Keeper, Mon} = spawn_monitor(fun() ->
                                          receive {Ref, go} -> ok end,
                                          keep(Owner, Ref, Parent, Prefix)
                                  end),
    ok = tracekit_own:untrace(Keeper),
    Keeper ! {Ref, go},
    receive
        {Ref, {ok, Dir}} ->
            demonitor(Mon, [flush]),
            {ok, Dir, {Keeper, Ref}};
        {Ref, {error, _} = E} ->
            demonitor(Mon, [flush]),
            E;
        {'DOWN', Mon, process, Keeper, _} ->
            {error, enomem}
    end.

keep(Owner, Ref, Parent, Prefix) ->
    Mon = monitor(process, Owner),
    ok = tracekit_own:mark([]),
    Made = dir(Parent, Prefix),
    Owner ! {Ref, Made},
    case Made of
        {ok, Dir} ->
            receive
                {Ref, release} -> ok;
                {'DOWN', Mon, process, Owner, _} -> delete_dir(Dir)
            end;
        {error, _} ->
            ok
    end.

release(Dir, {Keeper, Ref}) ->
    delete_dir(Dir),
    Keeper ! {Ref, release},
    ok.

replaceable(Path) ->
    case file:read_link_info(Path) of
        {ok, #file_info{type = regular}} -> ok;
        {ok, #file_info{type = symlink}} -> ok;
        {ok, #file_info{type = directory}} -> {error, eisdir};
        {ok, #file_info{}} -> {error, not_a_regular_file};
        {error, enoent} -> ok;
        {error, _} = E -> E
    end.

%% @doc Writes `Data' to `Path' as {@link open_output/1} does.
-spec write_file(file:filename_all(), iodata()) -> ok | {error, atom()}.
write_file(Path, Data) ->
    case open_output(Path) of
        {ok, Fd, Done} ->
            case file:write(Fd, Data) of
                ok -> Done(ok);
                {error, _} = E -> _ = Done(abort), E
            end;
        {error, _} = E ->
            E
    end.

%% @doc Deletes the directories of `Parent' named `Prefix' followed by the
%% OS process id of a VM that no longer runs, and owned by this user. Only
%% on a system that shows its processes in /proc: elsewhere nothing is
%% deleted.
-spec sweep(file:filename_all(), string()) -> ok.
sweep(Parent, Prefix) ->
    case {filelib:is_dir("/proc/self"), file:read_file_info("/proc/self")} of
        {true, {ok, #file_info{uid = Uid}}} ->
            case file:list_dir(Parent) of
                {ok, Names} ->
                    _ = [delete_dir(filename:join(Parent, N))
                         || N <- Names, lists:prefix(Prefix, N),
                            stale(filename:join(Parent, N), lists:nthtail(length(Prefix), N), Uid)],
                    ok;
                {error, _} ->
                    ok
            end;
        _ ->
            ok
    end.

%% Whether an OS process runs (a zombie, killed and not yet reaped by its
%% parent, does not).
running(OsPid) ->
    case file:read_file("/proc/" ++ OsPid ++ "/stat") of
        {ok, Stat} ->
            %% "pid (command) state ...": the command may hold spaces and
            %% parentheses, the state follows the last parenthesis.
            case string:split(Stat, ") ", trailing) of
                [_, <<"Z", _/binary>>] -> false;
                [_, <<"X", _/binary>>] -> false;
                _ -> true
            end;
        {error, _} ->
            false
    end.

stale(Path, Rest, Uid) ->
    case string:split(Rest, "-") of
        [OsPid, _] when OsPid =/= "" ->
            lists:all(fun(C) -> C >= $0 andalso C =< $9 end, OsPid)
                andalso OsPid =/= os:getpid()
                andalso not running(OsPid)
                andalso case file:read_link_info(Path) of
                            {ok, #file_info{type = directory, uid = Uid}} -> true;
                            _ -> false
                        end;
        _ ->
            false
    end.
