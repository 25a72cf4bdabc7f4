%% @doc Where tracekit's NIF libraries live.
%%
%% Every tracer module carries its own NIF library (the VM calls the
%% module's `enabled/3' and `trace/5', so those must be NIFs of that very
%% module); so does {@link tracekit_seq} (the causal order of seq_trace
%% events). tracekit_file's library also reads trace files. Each module loads
%% its library from its `-on_load' function with
%% `erlang:load_nif(tracekit_nif:path(?MODULE), 0)' (this module has no
%% on_load of its own, so that any on_load may call it).
-module(tracekit_nif).

-export([path/1, priv_dir/0]).

%% @doc The path (without extension) of the NIF library of `Module': in
%% the application's `priv' directory, or in the directory the environment
%% variable `TRACEKIT_NIF_DIR' names (the sanitizer build of the tests
%% uses it).
-spec path(module()) -> file:filename().
path(Module) ->
    Dir = case os:getenv("TRACEKIT_NIF_DIR") of
              false -> priv_dir();
              "" -> priv_dir();
              D -> D
          end,
    filename:join(Dir, atom_to_list(Module)).

%% @doc The application's `priv' directory, also when the beams were put in
%% the code path by hand rather than as an application.
-spec priv_dir() -> file:filename().
priv_dir() ->
    case code:priv_dir(tracekit) of
        {error, bad_name} ->
            Ebin = filename:dirname(code:which(?MODULE)),
            filename:join(filename:dirname(Ebin), "priv");
        Dir ->
            Dir
    end.
