"""Calls the registry with the retrievers of two frameworks, unmodified:
LangChain's RemoteLangChainRetriever (langchain-community) and LlamaIndex's PathwayRetriever
(llama-index-retrievers-pathway).

Usage: retrievers.py <base-url> <key> <query> <k>
Prints {"langchain": [{page_content, metadata}], "llamaindex": [{text, metadata, score}]}.
"""

import json
import sys
import warnings
from urllib.parse import urlsplit, urlunsplit

warnings.filterwarnings("ignore")

from langchain_community.retrievers import RemoteLangChainRetriever  # noqa: E402
from llama_index.retrievers.pathway import PathwayRetriever  # noqa: E402

base, key, query, k = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

lc = RemoteLangChainRetriever(
    url=f"{base}/v1/retrieve/langchain?k={k}",
    headers={"Authorization": f"Bearer {key}"},
)
docs = lc.invoke(query)

# The Pathway client cannot set headers: the key travels as the password of the URL.
parts = urlsplit(base)
with_key = urlunsplit((parts.scheme, f"registry:{key}@{parts.netloc}", parts.path, "", ""))
pw = PathwayRetriever(url=with_key, similarity_top_k=k)
nodes = pw.retrieve(query)

json.dump(
    {
        "langchain": [{"page_content": d.page_content, "metadata": d.metadata} for d in docs],
        "llamaindex": [
            {"text": n.node.text, "metadata": n.node.metadata, "score": n.score} for n in nodes
        ],
    },
    sys.stdout,
)
