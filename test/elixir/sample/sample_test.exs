# The sample of make test-elixir: a test that fails (asks a server for a
# key it does not have) and one that passes, recorded by :tracekit_exunit
# with its defaults and the calls of the server.
defmodule Sample.Store do
  use GenServer
  defstruct count: 0, items: %{}
  def start_link(items), do: GenServer.start_link(__MODULE__, items)
  def get(pid, key), do: GenServer.call(pid, {:get, key})
  @impl true
  def init(items), do: {:ok, %__MODULE__{items: items}}
  @impl true
  def handle_call({:get, key}, _from, state),
    do: {:reply, Map.get(state.items, key), %{state | count: state.count + 1}}
end

defmodule SampleTest do
  use ExUnit.Case

  setup context do
    :tracekit_exunit.record(context, calls: ["Sample.Store.handle_call/3 -> return"])
  end

  test "fails to get a key" do
    {:ok, pid} = Sample.Store.start_link(%{color: "blue"})
    assert Sample.Store.get(pid, :color) == "blue"
    assert Sample.Store.get(pid, :size) == 3
  end

  test "gets a key" do
    {:ok, pid} = Sample.Store.start_link(%{color: "blue"})
    assert Sample.Store.get(pid, :color) == "blue"
  end
end
