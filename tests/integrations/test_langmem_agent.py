"""A LangGraph agent with LangMem's memory tools remembers across threads through governed
memory, and what it writes is read back only once a reviewer promoted it.

The chat model is langchain-core's ``GenericFakeChatModel`` playing a script (no network):
it calls LangMem's ``manage_memory`` tool in one thread and its ``search_memory`` tool in
another. What the search tool hands back to the model is what the store returned.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Iterator
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from governed_memory.integrations.langgraph import GovernedStore, NamespaceMap
from tests.integrations.conftest import Deployment

with warnings.catch_warnings():
    # langmem 0.0.30 imports trustcall, which imports Send from its deprecated place.
    warnings.filterwarnings("ignore", message="Importing Send from langgraph.constants")
    from langmem import create_manage_memory_tool, create_search_memory_tool

#: LangMem's namespace: purpose "memories", the user as the subject.
NAMESPACE = ("memories", "{langgraph_user_id}")
MAP = NamespaceMap(agent_id="assistant", purpose=0, subject_id=1)


def tool_call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


def script() -> Iterator[AIMessage]:
    """What the model says, turn by turn: remember in thread 1, look up in thread 2 (twice:
    before and after the review)."""
    yield tool_call("manage_memory", {"content": "The user prefers dark mode."}, "call-1")
    yield AIMessage("Noted: dark mode.")
    for turn in (2, 3):
        yield tool_call("search_memory", {"query": "dark mode preference"}, f"call-{turn}")
        yield AIMessage("Let me check what I know.")


def agent(store: GovernedStore) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A tool-calling loop: the model, then LangMem's tools while it asks for them."""
    model = GenericFakeChatModel(messages=script())
    tools = [create_manage_memory_tool(NAMESPACE), create_search_memory_tool(NAMESPACE)]

    def think(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", think)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=InMemorySaver(), store=store)


def config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread, "langgraph_user_id": "user-1"}}


def recalled(state: dict[str, Any]) -> list[str]:
    """The memories the last search tool call handed to the model."""
    last = [m for m in state["messages"] if isinstance(m, ToolMessage)][-1]
    return [found["value"]["content"] for found in json.loads(str(last.content))]


def test_the_agent_remembers_across_threads_once_a_reviewer_promoted_its_write(
    deployment: Deployment,
) -> None:
    """Thread 1 stores a memory (quarantined: the agent's key is untrusted); thread 2 finds
    nothing until the operator promotes it, then finds it."""
    graph = agent(deployment.store("agent", MAP))
    graph.invoke({"messages": [HumanMessage("I prefer dark mode.")]}, config("thread-1"))
    waiting = deployment.quarantined()
    assert [(m.purpose, m.subject_id, m.trust.value) for m in waiting] == [
        ("memories", "user-1", "untrusted")
    ]
    question = {"messages": [HumanMessage("Which theme do I like?")]}
    before = graph.invoke(question, config("thread-2"))
    assert recalled(before) == []
    assert deployment.promote_all() == 1
    after = asyncio.run(graph.ainvoke(question, config("thread-2")))
    assert recalled(after) == ["The user prefers dark mode."]
