"""Generic controller runtime (client, informers, queue, controller, leader, events, server).

It knows nothing about Dynamo: everything here could serve another controller unchanged.
"""
