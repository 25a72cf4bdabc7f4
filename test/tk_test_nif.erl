%% @doc Where the tests find the NIF libraries only tests load (tk_seq_refuse,
%% tracekit_model): they are built outside priv/, into the directory
%% `test_nif' of the build tree that the Makefile exports as TRACEKIT_BUILD
%% (build/erts-VSN). Run the tests through make (`make eunit', `make ct').
-module(tk_test_nif).

-export([path/1]).

%% @doc The path (without extension) of the test NIF library of `Module'.
-spec path(module()) -> file:filename().
path(Module) ->
    case os:getenv("TRACEKIT_BUILD") of
        Build when is_list(Build), Build =/= "" ->
            filename:join([Build, "test_nif", atom_to_list(Module)]);
        _ ->
            erlang:error({no_build_dir,
                          "TRACEKIT_BUILD is not set: run the tests with make"})
    end.
