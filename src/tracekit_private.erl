%% @private
%% @doc Private directories for trace files: trace files hold message
%% contents, so the files an agent writes in a shared temporary directory,
%% and the files fetched from other nodes, are made in a directory that
%% only this user can enter (mode 0700, an unpredictable name), and the
%% directory is deleted with them.
%%
%% A directory's name is `Prefix', this VM's OS process id, a dash and
%% random characters: the directories that a VM left when it stopped while
%% tracing are found by {@link sweep/2} once a VM of the same node name
%% runs tracekit again.
-module(tracekit_private).

-export([dir/2, delete_dir/1, sweep/2, move_in/2]).

-include_lib("kernel/include/file.hrl").

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
