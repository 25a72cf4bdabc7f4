%% tracekit_private: what a private output leaves behind when the process
%% writing it goes away part way.
-module(tracekit_private_tests).

-include_lib("eunit/include/eunit.hrl").

tmp(Name) ->
    filename:join(os:getenv("TMPDIR", "/tmp"),
                  "tracekit_private_" ++ Name ++ "_" ++ integer_to_list(erlang:unique_integer([positive]))).

%% Waits up to about 10 s for Fun() to be true (a loaded machine).
eventually(Fun) -> eventually(Fun, 200).

eventually(Fun, 0) -> Fun();
eventually(Fun, N) ->
    case Fun() of
        true -> true;
        false -> timer:sleep(50), eventually(Fun, N - 1)
    end.

%% An output whose writer is killed before it is done (an export stopped
%% part way) leaves nothing in the directory it was written in: neither
%% the part written (message contents) nor its private directory, while
%% this VM runs on (a sweep only takes the directories of VMs that have
%% stopped).
killed_writer_leaves_nothing_test() ->
    Dir = tmp("killed"),
    ok = file:make_dir(Dir),
    Self = self(),
    try
        {Writer, Mon} =
            spawn_monitor(fun() ->
                                  {ok, Fd, _Done} =
                                      tracekit_private:open_output(filename:join(Dir, "out")),
                                  ok = file:write(Fd, binary:copy(<<"secret ">>, 1000)),
                                  Self ! {self(), written},
                                  receive after infinity -> ok end
                          end),
        receive {Writer, written} -> ok end,
        {ok, [Hidden]} = file:list_dir(Dir),
        ?assertMatch(".tracekit-out-" ++ _, Hidden),
        exit(Writer, kill),
        receive {'DOWN', Mon, process, Writer, killed} -> ok end,
        ?assert(eventually(fun() -> file:list_dir(Dir) =:= {ok, []} end))
    after
        file:del_dir_r(Dir)
    end.

%% Done(ok) and Done(abort) leave only the output asked for, and nothing
%% is taken away after (the directory's keeper is gone with it).
done_leaves_only_the_output_test() ->
    Dir = tmp("done"),
    ok = file:make_dir(Dir),
    try
        Out = filename:join(Dir, "out"),
        {ok, Fd, Done} = tracekit_private:open_output(Out),
        ok = file:write(Fd, <<"kept">>),
        ok = Done(ok),
        {ok, Fd2, Done2} = tracekit_private:open_output(filename:join(Dir, "other")),
        ok = file:write(Fd2, <<"forgotten">>),
        ok = Done2(abort),
        timer:sleep(100),
        ?assertEqual({ok, ["out"]}, file:list_dir(Dir)),
        ?assertEqual({ok, <<"kept">>}, file:read_file(Out))
    after
        file:del_dir_r(Dir)
    end.

%% A name that is not a file name is badarg, said, not a crash.
bad_names_test() ->
    [?assertEqual({error, badarg}, tracekit_private:write_file(Bad, <<"x">>))
     || Bad <- [42, {a}, [1.5], [-1], self(), [[$a], {b}]]],
    ?assertEqual({error, {file, 42, badarg}}, tracekit_report:write([], 42, #{})),
    ?assertEqual({error, {bad_dest, {a}}}, tracekit_export:jsonl([], {a})).
